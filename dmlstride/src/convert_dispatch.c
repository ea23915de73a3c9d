/* Run-time choice of the float16 row conversions. */
#include "convert_half.h"

convert_half_ops convert_half = {convert_f16_to_f32_row_soft, convert_f32_to_f16_row_soft, 0};

static int cpu_has_f16c(void) {
#if CONVERT_HAVE_F16C
    __builtin_cpu_init();
    return __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx");
#else
    return 0;
#endif
}

int convert_half_select(int allow_hardware) {
#if CONVERT_HAVE_F16C
    if (allow_hardware && cpu_has_f16c()) {
        convert_half.f16_to_f32 = convert_f16_to_f32_row_f16c;
        convert_half.f32_to_f16 = convert_f32_to_f16_row_f16c;
        convert_half.hardware = 1;
        return 1;
    }
#else
    (void)cpu_has_f16c;
    (void)allow_hardware;
#endif
    convert_half.f16_to_f32 = convert_f16_to_f32_row_soft;
    convert_half.f32_to_f16 = convert_f32_to_f16_row_soft;
    convert_half.hardware = 0;
    return 0;
}
