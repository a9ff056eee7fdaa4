/* The tensorboard and csv_monitor blocks: DeepSpeed's defaults (deepspeed/monitor/config.py) and the checks
 * of where their files go. DeepSpeed joins output_path and job_name with os.path.join, so an absolute
 * job_name would silently drop output_path and ".." would climb out of it: both refused here. */
#include <stdio.h>
#include <string.h>

#include "base/config/config_internal.h"

void zcfg_monitor_defaults(zcfg_monitor *m) {
    m->enabled = false;
    m->output_path[0] = 0;
    snprintf(m->job_name, sizeof m->job_name, "DeepSpeedJobName");
}

static bool has_dotdot(const char *p) {
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == 0 || s[2] == '/')) return true;
    return false;
}

static void check(zcfg_loader *L, const char *block, const zcfg_monitor *m) {
    char key[64];
    snprintf(key, sizeof key, "%s.job_name", block);
    if (m->job_name[0] == '/')
        zcfg_problem(L, key,
                     "\"%s\" is an absolute path: job_name names the directory inside output_path; put the "
                     "directory in %s.output_path",
                     m->job_name, block);
    else if (has_dotdot(m->job_name))
        zcfg_problem(L, key, "\"%s\" contains \"..\": job_name names a directory inside output_path; give a name",
                     m->job_name);
}

void zcfg_resolve_monitors(zcfg_loader *L) {
    check(L, "tensorboard", &L->c->tensorboard);
    check(L, "csv_monitor", &L->c->csv_monitor);
}
