/* A trivial kernel built once per context to read launch facts
 * (CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE) that only a kernel reveals. */
__kernel void fcl_probe(__global int *x) {
  if (x) x[get_global_id(0)] = 0;
}
