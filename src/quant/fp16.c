/* fp16.c — float32 to float16 conversion (quantize = fp16). Not written yet. */
#include "quant/internal.h"

int quant_fp16(Model *m, const QuantOpts *o, QuantReport *rep)
{
	(void)m, (void)o, (void)rep;
	return error("quantize = fp16 is not implemented yet");
}
