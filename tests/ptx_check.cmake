# Compiles the NVIDIA-only branch of the tensor-core kernels (inline PTX:
# mma.sync, ldmatrix, cp.async, shuffles) to PTX with clang, so that a
# change which breaks it is caught on machines without an NVIDIA GPU (PoCL
# only ever builds the emulated branch). Each program is its files
# concatenated in the library's order (src/attention_fastpath.c,
# attention_backward_mma.c, mma_probe.c) with the build options of one
# configuration. clang's header declares vstore_half only with cl_khr_fp16
# enabled, which NVIDIA's compiler does not need.
#   cmake -DCLANG=clang -DCL_DIR=cl -DWORK=dir -P ptx_check.cmake
# With -DPTXAS=path/to/ptxas (CUDA's, e.g. from the nvidia-cuda-nvcc-cu12
# wheel) each program is also assembled for sm_90 (ptx_prelude.cl supplies
# the OpenCL built-ins) and its registers and spills are printed: a change
# that costs the kernels registers shows without the GPU (the f16 forward
# at D=128 went from 210 to 238 with the masked-NaN fix-up, and lost 13%),
# and a wgmma program of the finite build (FCL_NONFINITE=0) whose products
# ptxas serializes (C7513) fails: use the ptxas of the driver's CUDA
# version (13.0 for driver 580), which wrote C7513 where 13.5 did not.
foreach(v CLANG CL_DIR WORK)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ptx_check.cmake: -D${v}= is required")
  endif()
endforeach()
file(MAKE_DIRECTORY "${WORK}")
set(programs
  "probe16|common/dtype.cl common/mma_warp.cl common/mma_common.cl common/mma_probe.cl|-DFCL_DTYPE=1|mma.sync"
  "probe32|common/dtype.cl common/mma_warp.cl common/mma_tf32.cl common/mma_tf32_probe.cl|-DFCL_DTYPE=0|mma.sync"
  "fwd_f16|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DMMA_VEC=1 -DMMA_GENERAL=0|cp.async"
  "fwd_f16_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_DROPOUT=1|cp.async"
  "fwd_f16_d128|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DMMA_VEC=1 -DMMA_GENERAL=0|cp.async"
  "fwd_f16_d128_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_DROPOUT=1|cp.async"
  "fwd_f16_mt2|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DMT=2 -DMMA_VEC=1 -DMMA_GENERAL=0|cp.async"
  "fwd_f16_mt2_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DMT=2 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_DROPOUT=1|cp.async"
  "fwd_bf16_d128_mt2|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=2 -DHEAD_DIM=128 -DMT=2 -DWARPS=2 -DBLOCK_N=32 -DMMA_VEC=1 -DMMA_GENERAL=0|cp.async"
  "fwd_bf16|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=2 -DHEAD_DIM=80 -DHEAD_DIM_V=40 -DMMA_VEC=0 -DMMA_GENERAL=1|mma.sync"
  "fwd_bf16_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_mma.cl|-DFCL_DTYPE=2 -DHEAD_DIM=80 -DHEAD_DIM_V=40 -DMMA_VEC=0 -DMMA_GENERAL=1 -DFCL_DROPOUT=1|mma.sync"
  "fwd_tf32|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_tf32.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_tf32.cl|-DFCL_DTYPE=0 -DHEAD_DIM=128 -DBLOCK_N=32 -DMMA_VEC=1 -DMMA_GENERAL=0|mma.sync"
  "fwd_tf32_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_tf32.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_tf32.cl|-DFCL_DTYPE=0 -DHEAD_DIM=128 -DBLOCK_N=32 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_DROPOUT=1|mma.sync"
  "fwd_tf32_odd|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_tf32.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_tf32.cl|-DFCL_DTYPE=0 -DHEAD_DIM=38 -DHEAD_DIM_V=20 -DMMA_VEC=0 -DMMA_GENERAL=1|mma.sync"
  "fwd_tf32_odd_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_tf32.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_fwd_tf32.cl|-DFCL_DTYPE=0 -DHEAD_DIM=38 -DHEAD_DIM_V=20 -DMMA_VEC=0 -DMMA_GENERAL=1 -DFCL_DROPOUT=1|mma.sync"
  "bwd_f16|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DBLOCK_N=16 -DSTAGES=2 -DKV_WARPS=2 -DKV_BLOCK_N=48 -DMMA_VEC=1 -DMMA_GENERAL=0|mma.sync"
  "bwd_f16_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DBLOCK_N=16 -DSTAGES=2 -DKV_WARPS=2 -DKV_BLOCK_N=48 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_DROPOUT=1|mma.sync"
  "bwd_f16_d64_stages2|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DMMA_VEC=1 -DMMA_GENERAL=0|cp.async"
  "bwd_f16_d64_stages2_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_DROPOUT=1|cp.async"
  "bwd_f16_d64_mt2|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DMT=2 -DWARPS=2 -DSTAGES=2 -DKV_WARPS=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DMMA_VEC=1 -DMMA_GENERAL=0|cp.async"
  "bwd_f16_d64_mt2_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DMT=2 -DWARPS=2 -DSTAGES=2 -DKV_WARPS=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_DROPOUT=1|cp.async"
  "bwd_bf16|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=2 -DHEAD_DIM=40 -DMMA_VEC=0 -DMMA_GENERAL=1|mma.sync"
  "bwd_bf16_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl|-DFCL_DTYPE=2 -DHEAD_DIM=40 -DMMA_VEC=0 -DMMA_GENERAL=1 -DFCL_DROPOUT=1|mma.sync"
  "rwkv6_chunk_fwd|rwkv6/rwkv6_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv6/rwkv6_chunk_common.cl rwkv6/rwkv6_chunk_state.cl rwkv6/rwkv6_chunk_out.cl|-DFCL_DTYPE=2 -DK_DIM=64 -DV_DIM=64 -DTC=64 -DBK=16 -DBV=64 -DWG=256 -DHK=32 -DHV=64 -DHC=8 -DFCL_UNROLL_HINTS=1|fcl_rwkv6_chunk_out"
  "rwkv6_chunk_bwd|rwkv6/rwkv6_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv6/rwkv6_chunk_common.cl rwkv6/rwkv6_chunk_state.cl rwkv6/rwkv6_chunk_out.cl rwkv6/rwkv6_chunk_bwd.cl|-DFCL_DTYPE=0 -DK_DIM=64 -DV_DIM=64 -DTC=64 -DBK=16 -DBV=32 -DWG=256 -DHK=32 -DHV=64 -DHC=8 -DFCL_UNROLL_HINTS=1|fcl_rwkv6_chunk_dk"
  "rwkv7_chunk_fwd|rwkv6/rwkv6_abi.h rwkv7/rwkv7_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv7/rwkv7_common.cl rwkv7/rwkv7_chunk_prep.cl rwkv7/rwkv7_chunk_state.cl rwkv7/rwkv7_chunk_out.cl|-DFCL_DTYPE=2 -DK_DIM=64 -DV_DIM=64 -DTC=32 -DBK=32 -DBV=64 -DHV=64 -DWG=256 -DFCL_UNROLL_HINTS=1|fcl_rwkv7_chunk_prep"
  "rwkv7_chunk_mma_bf16|rwkv6/rwkv6_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv7/rwkv7_abi.h rwkv7/rwkv7_common.cl rwkv7/rwkv7_chunk_prep.cl rwkv7/rwkv7_chunk_state.cl common/mma_warp.cl common/mma_common.cl rwkv7/rwkv7_chunk_out_mma.cl|-DFCL_DTYPE=2 -DK_DIM=64 -DV_DIM=64 -DTC=32 -DBK=32 -DHV=64 -DWG=256 -DFCL_UNROLL_HINTS=1|mma.sync"
  "rwkv7_chunk_mma_f16_d128|rwkv6/rwkv6_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv7/rwkv7_abi.h rwkv7/rwkv7_common.cl rwkv7/rwkv7_chunk_prep.cl rwkv7/rwkv7_chunk_state.cl common/mma_warp.cl common/mma_common.cl rwkv7/rwkv7_chunk_out_mma.cl|-DFCL_DTYPE=1 -DK_DIM=128 -DV_DIM=128 -DTC=32 -DBK=16 -DHV=64 -DWG=256 -DFCL_UNROLL_HINTS=1|mma.sync"
  "rwkv6_chunk_mma_bf16|rwkv6/rwkv6_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv6/rwkv6_chunk_common.cl common/mma_warp.cl common/mma_common.cl rwkv6/rwkv6_chunk_rows.cl rwkv6/rwkv6_chunk_state_mma.cl rwkv6/rwkv6_chunk_out_mma.cl|-DFCL_DTYPE=2 -DK_DIM=64 -DV_DIM=64 -DTC=64 -DBK=16 -DHK=64 -DHV=64 -DSST=2 -DWG=128 -DFCL_UNROLL_HINTS=1|mma.sync"
  "rwkv6_chunk_mma_f16_d128|rwkv6/rwkv6_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv6/rwkv6_chunk_common.cl common/mma_warp.cl common/mma_common.cl rwkv6/rwkv6_chunk_rows.cl rwkv6/rwkv6_chunk_state_mma.cl rwkv6/rwkv6_chunk_out_mma.cl|-DFCL_DTYPE=1 -DK_DIM=128 -DV_DIM=128 -DTC=64 -DBK=16 -DHK=64 -DHV=128 -DSST=2 -DWG=128 -DFCL_UNROLL_HINTS=1|mma.sync"
  "rwkv6_chunk_mma_bwd_bf16|rwkv6/rwkv6_abi.h common/dtype.cl rwkv6/rwkv6_common.cl rwkv6/rwkv6_chunk_common.cl common/mma_warp.cl common/mma_common.cl rwkv6/rwkv6_chunk_rows.cl rwkv6/rwkv6_chunk_state_mma.cl rwkv6/rwkv6_chunk_out_mma.cl rwkv6/rwkv6_chunk_bwd_mma.cl rwkv6/rwkv6_chunk_bwd.cl|-DFCL_DTYPE=2 -DK_DIM=64 -DV_DIM=64 -DTC=64 -DBK=16 -DBV=32 -DHK=64 -DHV=64 -DSST=2 -DWG=128 -DFCL_UNROLL_HINTS=1|mma.sync"
  "decode_f16|attention/attention_abi.h common/dtype.cl attention/attention_common.cl attention/kvcache_common.cl attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl attention/kvcache_split_merge.cl attention/kvcache_decode.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DHEAD_DIM_V=128 -DWG=128 -DTPK=16 -DKPW=4 -DROWS=4 -DVEC=8 -DFCL_UNROLL_HINTS=1 -DKV_PTX_CVT=1|cvt.f32.f16"
  "decode_mma_f16|attention/attention_abi.h common/dtype.cl common/mma_warp.cl common/mma_common.cl attention/attention_common.cl attention/kvcache_common.cl attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl attention/kvcache_split_merge.cl attention/kvcache_mma_formats.cl attention/kvcache_decode_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DHEAD_DIM_V=128 -DWG=128 -DKSUB=1 -DROWS=4 -DVEC=8 -DFCL_UNROLL_HINTS=1|mma.sync"
  "wgmma_probe|common/dtype.cl common/mma_warp.cl common/mma_common.cl common/wgmma_ops.cl common/wgmma.cl common/wgmma_probe.cl|-DFCL_DTYPE=2 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_f16|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DWARPS=8 -DBLOCK_N=64 -DMMA_GENERAL=0 -DFCL_NONFINITE=1 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_f16_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DWARPS=8 -DBLOCK_N=64 -DMMA_GENERAL=0 -DFCL_NONFINITE=1 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_bf16_d128|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=2 -DHEAD_DIM=128 -DHEAD_DIM_V=96 -DWARPS=4 -DBLOCK_N=48 -DMMA_GENERAL=1 -DFCL_NONFINITE=1 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_bf16_d128_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=2 -DHEAD_DIM=128 -DHEAD_DIM_V=96 -DWARPS=4 -DBLOCK_N=48 -DMMA_GENERAL=1 -DFCL_NONFINITE=1 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_f16_d128_nf0|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DWARPS=4 -DBLOCK_N=64 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_f16_d128_nf0_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DWARPS=4 -DBLOCK_N=64 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_f16_d128_qreg|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DWARPS=4 -DBLOCK_N=48 -DLOCAL_OPS=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "fwd_wgmma_f16_d128_qreg_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_fwd_wgmma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DWARPS=4 -DBLOCK_N=48 -DLOCAL_OPS=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=64 -DWK_STAGES=2 -DWQ_WARPS=4 -DWQ_BLOCK_N=64 -DWQ_STAGES=2 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=64 -DWK_STAGES=2 -DWQ_WARPS=4 -DWQ_BLOCK_N=64 -DWQ_STAGES=2 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16_stages3|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=3 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=3 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16_stages3_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=64 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=3 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=3 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16_d128_qreg|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=1 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=3 -DWQ_LOCAL_OPS=1 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16_d128_qreg_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=1 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=3 -DWQ_LOCAL_OPS=1 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16_d128_kreg|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=2 -DWK_LOCAL_OPS=1 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=3 -DWQ_LOCAL_OPS=1 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_f16_d128_kreg_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DBLOCK_N=32 -DSTAGES=2 -DKV_BLOCK_N=32 -DKV_STAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=2 -DWK_LOCAL_OPS=1 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=3 -DWQ_LOCAL_OPS=1 -DMMA_VEC=1 -DMMA_GENERAL=0 -DFCL_NONFINITE=0 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_bf16_d128|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=2 -DHEAD_DIM=128 -DBLOCK_N=16 -DSTAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=1 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=1 -DKV_WARPS=2 -DKV_BLOCK_N=48 -DMMA_VEC=1 -DMMA_GENERAL=1 -DFCL_NONFINITE=0 -DFCL_SM90A=1|FCL90A wgmma.mma_async"
  "bwd_wgmma_bf16_d128_drop|attention/attention_abi.h common/dtype.cl attention/attention_common.cl common/mma_warp.cl common/mma_common.cl attention/attention_dropout.cl attention/attention_dropout_mma.cl common/wgmma_ops.cl common/wgmma.cl attention/attention_bwd_mma.cl attention/attention_bwd_mma_dq.cl attention/attention_bwd_mma_dkdv.cl attention/attention_bwd_wgmma_dkdv.cl attention/attention_bwd_wgmma_dq.cl|-DFCL_DTYPE=2 -DHEAD_DIM=128 -DBLOCK_N=16 -DSTAGES=2 -DWK_WARPS=4 -DWK_BLOCK_N=32 -DWK_STAGES=1 -DWQ_WARPS=4 -DWQ_BLOCK_N=32 -DWQ_STAGES=1 -DKV_WARPS=2 -DKV_BLOCK_N=48 -DMMA_VEC=1 -DMMA_GENERAL=1 -DFCL_NONFINITE=0 -DFCL_SM90A=1 -DFCL_DROPOUT=1|FCL90A wgmma.mma_async"
  "decode_mma_f16_q8_q4|attention/attention_abi.h common/dtype.cl common/mma_warp.cl common/mma_common.cl attention/attention_common.cl attention/kvcache_common.cl attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl attention/kvcache_split_merge.cl attention/kvcache_mma_formats.cl attention/kvcache_decode_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DHEAD_DIM_V=128 -DWG=128 -DKSUB=1 -DROWS=4 -DVEC=8 -DFCL_UNROLL_HINTS=1 -DKV_K_FMT=3 -DKV_V_FMT=4 -DKV_APPEND_FUSED=1|mul.rn.f16x2"
  "decode_mma_f16_q8_q4_lanes|attention/attention_abi.h common/dtype.cl common/mma_warp.cl common/mma_common.cl attention/attention_common.cl attention/kvcache_common.cl attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl attention/kvcache_split_merge.cl attention/kvcache_mma_formats.cl attention/kvcache_decode_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DHEAD_DIM_V=128 -DWG=128 -DKSUB=1 -DROWS=4 -DVEC=8 -DFCL_UNROLL_HINTS=1 -DKV_K_FMT=3 -DKV_V_FMT=4 -DKV_APPEND_FUSED=1 -DKV_K_LANE=1 -DKV_V_LANE=1|mul.rn.f16x2"
  "decode_mma_f16_e4m3_e5m2|attention/attention_abi.h common/dtype.cl common/mma_warp.cl common/mma_common.cl attention/attention_common.cl attention/kvcache_common.cl attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl attention/kvcache_split_merge.cl attention/kvcache_mma_formats.cl attention/kvcache_decode_mma.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DHEAD_DIM_V=128 -DWG=128 -DKSUB=1 -DROWS=4 -DVEC=8 -DFCL_UNROLL_HINTS=1 -DKV_K_FMT=5 -DKV_V_FMT=6|prmt.b32"
  "decode_f16_e4m3|attention/attention_abi.h common/dtype.cl attention/attention_common.cl attention/kvcache_common.cl attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl attention/kvcache_split_merge.cl attention/kvcache_decode.cl|-DFCL_DTYPE=1 -DHEAD_DIM=128 -DHEAD_DIM_V=128 -DWG=128 -DTPK=16 -DKPW=4 -DROWS=4 -DVEC=8 -DFCL_UNROLL_HINTS=1 -DKV_PTX_CVT=1 -DKV_K_FMT=5 -DKV_V_FMT=6|fcl_kv_decode"
  "decode_mma_bf16_ksub2|attention/attention_abi.h common/dtype.cl common/mma_warp.cl common/mma_common.cl attention/attention_common.cl attention/kvcache_common.cl attention/kvcache_format.cl attention/kvcache_append.cl attention/kvcache_tile.cl attention/kvcache_split_merge.cl attention/kvcache_mma_formats.cl attention/kvcache_decode_mma.cl|-DFCL_DTYPE=2 -DHEAD_DIM=128 -DHEAD_DIM_V=128 -DWG=128 -DKSUB=2 -DROWS=16 -DVEC=8 -DFCL_UNROLL_HINTS=1|mma.sync")
foreach(p IN LISTS programs)
  string(REPLACE "|" ";" parts "${p}")
  list(GET parts 0 name)
  list(GET parts 1 files)
  list(GET parts 2 defs)
  list(GET parts 3 expect)
  separate_arguments(files)
  separate_arguments(defs)
  set(src "")
  set(cpu "")
  if(PTXAS)
    file(READ "${CMAKE_CURRENT_LIST_DIR}/ptx_prelude.cl" src)
    set(cpu -mcpu=sm_90)
  endif()
  foreach(f IN LISTS files)
    file(READ "${CL_DIR}/${f}" text)
    string(APPEND src "${text}\n")
  endforeach()
  file(WRITE "${WORK}/${name}.cl" "${src}")
  execute_process(
    COMMAND "${CLANG}" -x cl -cl-std=CL1.2 -target nvptx64-nvidia-nvcl ${cpu} -O2
            -Xclang -finclude-default-header -Xclang -cl-ext=+cl_khr_fp16
            -DFCL_ASM=__asm__ ${defs} -S -o "${WORK}/${name}.ptx" "${WORK}/${name}.cl"
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${name}: clang could not compile the PTX branch:\n${err}")
  endif()
  file(READ "${WORK}/${name}.ptx" ptx)
  string(FIND "${ptx}" "${expect}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "${name}: the PTX holds no ${expect}")
  endif()
  message(STATUS "${name}: PTX compiled")
  if(PTXAS)
    # clang writes an nvcl .target line ptxas refuses; cp.async needs 7.0+.
    # Programs built with FCL_SM90A lose their markers and target sm_90a,
    # as core/ptx_retarget.c does to NVIDIA's PTX.
    set(arch sm_90)
    if(defs MATCHES "FCL_SM90A=1")
      set(arch sm_90a)
      string(REPLACE "// FCL90A " "" ptx "${ptx}")
    endif()
    string(REGEX REPLACE "\n\\.version [^\n]*" "\n.version 8.0" ptx "${ptx}")
    string(REGEX REPLACE "\n\\.target [^\n]*" "\n.target ${arch}" ptx "${ptx}")
    file(WRITE "${WORK}/${name}.sm90.ptx" "${ptx}")
    execute_process(COMMAND "${PTXAS}" -v -arch=${arch} -o "${WORK}/${name}.cubin"
                            "${WORK}/${name}.sm90.ptx"
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "${name}: ptxas failed:\n${out}")
    endif()
    # The wgmma kernels of the finite build must keep their products in
    # flight: ptxas says C7513/C7514 where it serializes them (a branch
    # after a step's last wait did, under ptxas 13.0: docs/wgmma_route.md).
    if(defs MATCHES "FCL_NONFINITE=0" AND out MATCHES "C751[34]")
      message(FATAL_ERROR "${name}: ptxas serializes the wgmma products:\n${out}")
    endif()
    string(REGEX MATCHALL "Used [0-9]+ registers|[0-9]+ bytes spill [a-z]+" regs "${out}")
    message(STATUS "${name}: ${arch}: ${regs}")
  endif()
endforeach()
