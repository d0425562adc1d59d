/* lab_internal.h - what the lab stage's files share (lab_design.c,
 * lab_cost.c, lab_stochastic.c): the embedded target of one configuration,
 * so the matrix, the calibration and the stochastic leg name the same
 * profiles. */
#ifndef DRIFT_PIPELINE_LAB_INTERNAL_H
#define DRIFT_PIPELINE_LAB_INTERNAL_H

#include <stddef.h>

/* The embedded target of one configuration: weight format `prec`, the ISA
 * keys hw_spec ("isa=auto") and the kernel keys fw_spec
 * ("reduce=sequential") over the cpu-f32 profile. */
void lab_config_target(char *out, size_t cap, const char *model_path, const char *prec, const char *hw_spec,
                       const char *fw_spec, int threads);

#endif
