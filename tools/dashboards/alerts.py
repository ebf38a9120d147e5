"""vigil — alerts: what vmalert fires now, and the scrape targets."""

from __future__ import annotations

from tools.dashboards._lib import Dashboard, bargauge, dashboard, stat, table, target, timeseries

UID = "vigil-alerts"


#: the jobs on each GPU that has an alert firing: a GPU alert is the GPU's, the jobs on it are not
#: among its labels (roles/vmalert/files/rules/vigil-gpu-alerts.yml)
JOBS_ON_ALERTING_GPUS = (
    "max by (instance, gpu, hpc_job, user, account) ("
    'group by (instance, gpu, hpc_job) (DCGM_FI_DEV_GPU_TEMP{hpc_job!=""})'
    " * on (instance, hpc_job) group_left (user, account)"
    " max by (instance, hpc_job, user, account) (last_over_time(slurm_job_info[10m])))"
    ' and on (instance, gpu) ALERTS{alertstate="firing"}'
)


def build() -> Dashboard:
    firing = 'ALERTS{alertstate="firing"}'
    return dashboard(
        UID,
        "vigil — alerts",
        "What vmalert fires now, and the scrape targets.",
        [
            stat(
                "Firing by severity",
                (0, 0, 12, 5),
                [
                    target(f'count(ALERTS{{alertstate="firing", severity="{s}"}}) or vector(0)', s, ref)
                    for s, ref in (("P0", "A"), ("P1", "B"), ("P2", "C"))
                ],
                steps=((None, "green"), (1, "red")),
            ),
            stat(
                "Scrape targets down",
                (12, 0, 12, 5),
                [target("count(up == 0) or vector(0)", "down")],
                steps=((None, "green"), (1, "red")),
            ),
            table(
                "Firing alerts",
                (0, 5, 14, 10),
                [target(firing, instant=True, table=True)],
                hide=("Time", "Value", "__name__", "alertstate"),
            ),
            table(
                "Jobs on the GPUs that alert",
                (14, 5, 10, 10),
                [target(JOBS_ON_ALERTING_GPUS, instant=True, table=True)],
                hide=("Time", "Value"),
                description="A GPU alert is the GPU's, not a job's: these are the jobs on each GPU with an "
                "alert firing now, with their user and account.",
            ),
            timeseries(
                "Firing alerts over time",
                (0, 15, 12, 8),
                [target(f"count by (severity) ({firing})", "{{severity}}")],
                bars=True,
            ),
            bargauge(
                "Scrape targets up per job",
                (12, 15, 12, 8),
                [target("job:up:ratio", "{{job}}")],
                unit="percentunit",
                steps=((None, "red"), (0.99, "green")),
            ),
        ],
    )
