#!/usr/bin/env bash
# Runs every reproduction once, bounded, from the worktree root; output in repro/out/.
cd "$(dirname "$0")/.."; mkdir -p repro/out
R=/work/shared/repro/store
run() { n=$1; shift; echo "### $n $(date -u +%T)"; timeout 120 "$@" > repro/out/$n.txt 2>&1; echo "rc=$?" >> repro/out/$n.txt; cat repro/out/$n.txt; }
run 01 bash $R/01-restore-old-aof-wrong-allowed.sh
run 05 bash $R/05-file-store-clock-back-revives-expired-lease.sh
run 10 bash repro/10-url-spelling-restore-wrong-allowed.sh
run 12-slash-down env CLI_STORE=slash DOWN=1 NOASK=1 bash repro/12-file-store-restore-backup.sh
run 12 bash repro/12-file-store-restore-backup.sh
run 15 bash repro/15-full-home-floor-not-recorded.sh
run 13 bash repro/13-redis-rdb-restore-flushall-empty.sh
run 14 bash repro/14-daemon-clock-forward-back.sh
run 16 bash repro/16-two-daemons-one-home.sh
run 11 bash repro/11-key-prefix-spurious-regressed.sh
run 06 env SECS=15 bash $R/06-false-store-regressed-under-concurrent-asks.sh
run 02 bash $R/02-sentinel-stopped-primary-stale-link-wrong-allowed.sh
run 03 bash $R/03-sentinel-partition-split-brain-wrong-allowed.sh
