// MCSERVE_HD marks math shared by the CPU and CUDA backends (`__host__ __device__` under nvcc).
#pragma once

#if defined(__CUDACC__)
#define MCSERVE_HD __host__ __device__ inline
#else
#define MCSERVE_HD inline
#endif
