#!/usr/bin/env bash
# File store; the daemon's wall clock (libfaketime, offset file re-read on every call) steps
# forward 120 s then back to true, while the CLI's clock is true. Want: forward: lane-a DENIED
# (expired by that clock) -- a fault of the clock, fail closed; back: clock_regressed (never
# ALLOWED of a lease the home found passed), lane-b never ALLOWED; accept-clock is the way out.
set -u
BIN=${BIN:-$PWD/target/release}
W=$(mktemp -d /tmp/rt20-14.XXXXXX); chmod 700 $W
export ROW_FENCE_HOME=$W/home ROW_FENCE_STORE=file; mkdir -m 700 -p $ROW_FENCE_HOME
echo "+0" > $W/offset
trap 'kill -9 $DPID 2>/dev/null; wait 2>/dev/null; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
env LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 FAKETIME_TIMESTAMP_FILE=$W/offset FAKETIME_NO_CACHE=1 DONT_FAKE_MONOTONIC=1 \
  $BIN/row-fence-resident 2>$W/daemon.log & DPID=$!; sleep 0.5
ask() { $BIN/row-fence-ask --descriptor $W/$1.json 2>&1 | tail -1; echo "  $1 exit ${PIPESTATUS[0]} $2"; }
$BIN/row-fence acquire board-1 row-1 --lane lane-a --ttl 60s --write-descriptor $W/a.json >/dev/null
ask a "(ALLOWED)"
echo "+120s" > $W/offset; sleep 0.2
ask a "(clock forward: DENIED expired is fail-closed)"
echo "+0" > $W/offset; sleep 0.2
ask a "(clock back: want clock_regressed, never ALLOWED)"
$BIN/row-fence renew board-1 row-1 --lane lane-a --generation 1 --ttl 60s 2>&1 | tail -1; echo "  renew exit ${PIPESTATUS[0]}"
$BIN/row-fence acquire board-1 row-1 --lane lane-b --write-descriptor $W/b.json 2>&1 | tail -1; echo "  lane-b acquire (no takeover) exit ${PIPESTATUS[0]}"
$BIN/row-fence store accept-clock board-1 2>&1 | tail -2
ask a "(after accept-clock: lease dropped, want DENIED)"
$BIN/row-fence acquire board-1 row-1 --lane lane-b --write-descriptor $W/b.json >/dev/null; echo "  lane-b acquire exit $?"
ask b "(ALLOWED)"; ask a "(DENIED)"
echo "+120s" > $W/offset; sleep 0.2; ask b "(forward again: DENIED expired fail-closed)"
echo "-30s" > $W/offset; sleep 0.2; ask b "(now behind: want clock_regressed)"; ask a "(want not ALLOWED)"
