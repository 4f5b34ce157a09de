/* transport/cuda/kvmem_hbm.h — KV blocks in HBM for the core's block-memory
 * hook (core/kvmem.h): kv_engine_cfg.kvmem = {&kv_kvmem_hbm, NULL}. Needs
 * -DKVCONN_CUDA=ON and a GPU (open() fails with KV_ENOSYS without one). */
#ifndef KVCONN_TRANSPORT_CUDA_KVMEM_HBM_H
#define KVCONN_TRANSPORT_CUDA_KVMEM_HBM_H

#include "core/kvmem.h"

#ifdef __cplusplus
extern "C" {
#endif

extern const kv_kvmem_ops kv_kvmem_hbm;

#ifdef __cplusplus
}
#endif

#endif
