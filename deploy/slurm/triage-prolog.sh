#!/bin/bash
# Slurm Prolog/Epilog health gate: drain this node when `triage health-check` finds it unhealthy.
#
#   slurm.conf:   Prolog=/usr/local/bin/triage-prolog.sh
#                 Epilog=/usr/local/bin/triage-prolog.sh
#                 PrologFlags=Alloc
#
# slurmd runs it as root on every node of an allocation: before the job (with PrologFlags=Alloc,
# once at allocation rather than at the first step) and after it. Exit 0 lets the job start.
# On a non-zero exit Slurm drains the node anyway (and requeues the job, for a Prolog), with a
# generic reason ("Prolog error"); draining here first puts the check's own line in the reason
# (`sinfo -R`), e.g. "triage health-check: node7 UNHEALTHY: GPU 1 lost (Xid 79 at ...)".
# The check failing to run at all (triage missing, bad flags: exit 2, 127) drains too: a gate
# that cannot look must not wave jobs through. `scontrol update nodename=NODE state=resume`
# returns the node once repaired (and `triage nodes clear NODE` if it is quarantined).
#
# Settings (environment, e.g. from slurmd's unit file): TRIAGE, the triage command;
# TRIAGE_DATA_DIR, the site's data dir on shared storage; TRIAGE_HEALTH_ARGS, more flags
# (e.g. "--gpu nvml --expect-gpus 8 --min-free-disk-gb 20").
set -u
# slurmd gives prologs no search path (Slurm's Prolog and Epilog Guide): scontrol and logger.
export PATH="${PATH:-/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin}"

TRIAGE=${TRIAGE:-/opt/triage/.venv/bin/triage}
DATA_DIR=${TRIAGE_DATA_DIR:-/shared/triage-data}
NODE=${SLURMD_NODENAME:-$(hostname -s)}

# shellcheck disable=SC2086  # TRIAGE_HEALTH_ARGS is a list of flags, split on purpose
out=$("$TRIAGE" health-check --data-dir "$DATA_DIR" --node "$NODE" ${TRIAGE_HEALTH_ARGS:-} 2>&1)
rc=$?
[ "$rc" -eq 0 ] && exit 0

reason=$(printf '%s\n' "$out" | tail -n 1 | cut -c 1-200)
[ -n "$reason" ] || reason="triage health-check exited $rc with no output"
[ "$rc" -eq 1 ] || reason="triage health-check could not run (exit $rc): $reason"
reason=$(printf '%s' "$reason" | cut -c 1-200)
command -v logger >/dev/null 2>&1 && logger -t triage-prolog -- "$reason"
scontrol update nodename="$NODE" state=drain reason="$reason"
exit 1
