/* comms_logger's figures in zinc train's --report (cli/common/comms_report.c). */
#ifndef ZINC_CLI_COMMS_REPORT_H
#define ZINC_CLI_COMMS_REPORT_H

#include <jansson.h>

#include "zinc.h"

/* Adds "comms": {"world_size", "ops": [...]} with this rank's rows (zinc_comms_summary) when comms_logger
 * recorded any; returns -1 when the object cannot be built. */
int zcli_report_comms(const zinc_engine *e, json_t *report);

#endif
