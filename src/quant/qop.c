/* qop.c — static quantization in QOperator form (QLinearConv,
 * QLinearMatMul, ...). Not written yet. */
#include "quant/internal.h"

int quant_static_qoperator(Model *m, const CalibStats *stats, const QuantOpts *o, QuantReport *rep)
{
	(void)m, (void)stats, (void)o, (void)rep;
	return error("quantize.format = qoperator is not implemented yet for quantize = static: use qdq");
}
