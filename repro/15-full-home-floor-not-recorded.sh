#!/usr/bin/env bash
# The home's file system is full (the store is elsewhere: file:DIR here; Redis the same). The
# CLI's takeover is committed and acknowledged (exit 0), but its floor write to revisions.json
# fails and is ignored (flush_if_eager: `let _ =`). The store is then restored from a backup
# taken before the takeover: the daemon answers lane-a ALLOWED. Want: the takeover warns / the
# restore is caught (store_regressed); never ALLOWED for lane-a.
# Part 2: the daemon finds lane-a's lease expired, cannot persist the expiry floor (warn only),
# answers; restarted with the clock 3 s behind it ALLOWs the expired lease.
set -u
BIN=${BIN:-$PWD/target/release}
W=$(mktemp -d /tmp/rt20-15.XXXXXX); chmod 700 $W
mkdir -p $W/home; mount -t tmpfs -o size=256k,mode=700 tmpfs $W/home || exit 2
export ROW_FENCE_HOME=$W/home ROW_FENCE_STORE=file:$W/store
FT="LD_PRELOAD=/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1 FAKETIME=-3s DONT_FAKE_MONOTONIC=1"
trap 'kill -9 $DPID 2>/dev/null; wait 2>/dev/null; umount $W/home; [ -n "${KEEP:-}" ] || rm -rf $W' EXIT
$BIN/row-fence-resident 2>$W/daemon.log & DPID=$!; sleep 0.5
$BIN/row-fence acquire board-1 row-1 --lane lane-a --write-descriptor $W/a.json >/dev/null
cp -a $W/store $W/backup
cat $ROW_FENCE_HOME/revisions.json | tr -d ' \n'; echo
dd if=/dev/zero of=$ROW_FENCE_HOME/filler bs=4k 2>/dev/null; df -h $ROW_FENCE_HOME | tail -1
$BIN/row-fence acquire board-1 row-1 --lane lane-b --takeover --write-descriptor $W/b.json; echo "takeover exit $? (acknowledged)"
cat $ROW_FENCE_HOME/revisions.json | tr -d ' \n'; echo
cp -a $W/backup/. $W/store/
$BIN/row-fence-ask --descriptor $W/a.json; echo "lane-a exit $? (0 = WRONG ALLOWED; want store_regressed)"
echo "== part 2: expiry floor not persisted"
kill $DPID; wait $DPID 2>/dev/null; rm -f $ROW_FENCE_HOME/filler
$BIN/row-fence store accept-regression board-1 >/dev/null 2>&1
$BIN/row-fence-resident 2>>$W/daemon.log & DPID=$!; sleep 0.5
$BIN/row-fence acquire board-1 row-2 --lane lane-c --ttl 2s --write-descriptor $W/c.json >/dev/null
dd if=/dev/zero of=$ROW_FENCE_HOME/filler bs=4k 2>/dev/null
sleep 3.5
$BIN/row-fence-ask --descriptor $W/c.json; echo "lane-c exit $? (DENIED: expired)"
kill $DPID; wait $DPID 2>/dev/null
env $FT $BIN/row-fence-resident 2>>$W/daemon.log & DPID=$!; sleep 0.5
$BIN/row-fence-ask --descriptor $W/c.json; echo "lane-c, daemon restarted 3 s behind: exit $? (0 = WRONG ALLOWED of a lease found expired; want clock_regressed)"
grep -i "cannot write" $W/daemon.log | head -2
