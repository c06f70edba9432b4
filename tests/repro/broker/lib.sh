#!/usr/bin/env bash
# Shared setup for the broker reproduction scripts (sourced, never run), changed from the
# handed one to today's documented hard mode only (docs/hard-mode.md "Key broker" and "The
# daemon pushes for the lanes", docs/forge.md): the daemon's push socket, to which each
# lane's git pushes through git-remote-row-fence; one push key per lane in the daemon, each forced on the forge into
# git-shell with ROW_FENCE_LANE naming its lane; a row scope in boards.toml; the forge's
# pre-receive hook (`row-fence install forge-hook`) on each repository; the forge's host
# key given to the broker. The attack scripts are the handed ones, unchanged. The setup
# below stops on its own failures; the attacks then run without `set -e`, so a refused
# step is reported by its RESULT line instead of ending the script. As root, under
# $RT_TMP (default /tmp/rt4b/; its tests give a temp dir of their own):
#   users rt4b_<t>s (forge, git-shell forced command), rt4b_<t>f (the daemon: fence),
#   rt4b_<t>a / rt4b_<t>b / rt4b_<t>c (lanes; c is bound to no lane unless a script binds it),
#   a real sshd on a free 127.0.0.1 port (MaxSessions 1 as README step 7 advises, unless
#   MAXSESSIONS says otherwise), the daemon as fence with the broker on, a push key and a
#   read key (fetch-only forced command), board-1/row-1 granted to lane-a.
# Everything is removed at exit (users, processes started, the run directory).
set -euo pipefail
: "${BIN:?set BIN to the directory holding row-fence, row-fence-ask, row-fence-resident}"
[ "$(id -u)" -eq 0 ] || { echo "run as root (useradd, sshd)" >&2; exit 2; }
for b in row-fence row-fence-ask row-fence-resident; do
  [ -x "$BIN/$b" ] || { echo "$BIN/$b missing" >&2; exit 2; }
done
SSHD_BIN="$(command -v sshd || echo /usr/sbin/sshd)"
GIT_SHELL="$(command -v git-shell)"
# git-remote-row-fence must be on the lanes' PATH (installed beside row-fence-ask).
LANE_PATH="$BIN:/usr/local/bin:/usr/bin:/bin"
PY=/usr/bin/python3
RT_TMP="${RT_TMP:-/tmp/rt4b}"
mkdir -p "$RT_TMP" && chmod 755 "$RT_TMP"
work="$(mktemp -d "$RT_TMP/run.XXXXXX")"
chmod 755 "$work"
t="$(printf '%04x' $((RANDOM % 65536)))"
while id "rt4b_${t}s" >/dev/null 2>&1; do t="$(printf '%04x' $((RANDOM % 65536)))"; done
RT_USERS=()
RT_GROUPS=()
RT_PIDS=()
daemon_pid=""
sshd_pid=""
rt_cleanup() {
  set +e
  for p in "${RT_PIDS[@]}"; do kill "$p" 2>/dev/null; done
  [ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
  [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null && wait "$sshd_pid" 2>/dev/null
  # Whatever still runs under the users this run made (a ControlPersist master forked by
  # ssh -f, a held session): each by its pid.
  for u in "${RT_USERS[@]}"; do
    uid="$(id -u "$u" 2>/dev/null)" || continue
    for p in $(ps -o pid= -u "$uid" 2>/dev/null); do kill "$p" 2>/dev/null; done
  done
  sleep 0.3
  for u in "${RT_USERS[@]}"; do
    uid="$(id -u "$u" 2>/dev/null)" || continue
    for p in $(ps -o pid= -u "$uid" 2>/dev/null); do kill -9 "$p" 2>/dev/null; done
  done
  for u in "${RT_USERS[@]}"; do userdel "$u" 2>/dev/null; done
  for g in "${RT_GROUPS[@]}"; do groupdel "$g" 2>/dev/null; done
  [ -n "${KEEP:-}" ] || rm -rf "$work"
}
trap rt_cleanup EXIT

rt_user() { # TAG: makes user rt4b_<t><TAG>, HOME $work/<TAG>-home (0700, its own)
  local name="rt4b_${t}$1" home="$work/$1-home"
  RT_USERS+=("$name")
  useradd -M -U -p '*' -s /bin/sh -d "$home" "$name"
  mkdir -m 700 "$home"
  chown "$name:$name" "$home"
}
for tag in s f a b c; do rt_user "$tag"; done
FORGE="rt4b_${t}s"; FENCE="rt4b_${t}f"; LA="rt4b_${t}a"; LB="rt4b_${t}b"; LC="rt4b_${t}c"
uid_of() { id -u "$1"; }
rt_die() { echo "SETUP FAILED: $*" >&2; [ -f "$work/daemon.log" ] && tail -5 "$work/daemon.log" >&2; exit 2; }

# Keys: root's, in a directory no lane can enter; public halves public.
mkdir -m 700 "$work/keys"
ssh-keygen -q -t ed25519 -N "" -C rt4b-push -f "$work/keys/push"
ssh-keygen -q -t ed25519 -N "" -C rt4b-push-b -f "$work/keys/push-b"
ssh-keygen -q -t ed25519 -N "" -C rt4b-read -f "$work/keys/read"
ssh-keygen -q -t ed25519 -N "" -C rt4b-host -f "$work/keys/host"
install -m 644 "$work/keys/push.pub" "$work/push.pub"     # lane-a's push key
install -m 644 "$work/keys/push-b.pub" "$work/push-b.pub" # lane-b's push key
install -m 644 "$work/keys/host.pub" "$work/host.pub"
install -m 644 "$work/keys/read.pub" "$work/read.pub"

# The forge: sshd on loopback; the push key forced into git-shell, the read key fetch-only.
PORT="$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
mkdir -p /run/sshd
cat >"$work/fetch-only" <<EOF
#!/bin/sh
case "\$SSH_ORIGINAL_COMMAND" in
  "git-upload-pack "*) exec $GIT_SHELL -c "\$SSH_ORIGINAL_COMMAND" ;;
esac
echo 'this key may only fetch' >&2
exit 1
EOF
chmod 755 "$work/fetch-only"
opts="no-port-forwarding,no-agent-forwarding,no-X11-forwarding,no-pty"
{
  # docs/forge.md: one line per lane, its forced command naming the lane.
  printf 'command="env ROW_FENCE_LANE=lane-a %s -c \\"$SSH_ORIGINAL_COMMAND\\"",%s %s\n' "$GIT_SHELL" "$opts" "$(cat "$work/push.pub")"
  printf 'command="env ROW_FENCE_LANE=lane-b %s -c \\"$SSH_ORIGINAL_COMMAND\\"",%s %s\n' "$GIT_SHELL" "$opts" "$(cat "$work/push-b.pub")"
  printf 'command="%s",%s %s\n' "$work/fetch-only" "$opts" "$(cat "$work/read.pub")"
} >"$work/authorized_keys"
cat >"$work/sshd_config" <<EOF
Port $PORT
ListenAddress 127.0.0.1
HostKey $work/keys/host
PidFile $work/sshd.pid
AuthorizedKeysFile $work/authorized_keys
StrictModes no
UsePAM no
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
AllowUsers $FORGE
LogLevel VERBOSE
MaxSessions ${MAXSESSIONS:-1}
${SSHD_EXTRA:-}
EOF
"$SSHD_BIN" -D -e -f "$work/sshd_config" 2>"$work/sshd.log" &
sshd_pid=$!
REMOTE="$work/remote.git"
git init -q --bare -b main "$REMOTE"
git init -q --bare -b main "$work/other.git"
chown -R "$FORGE:$FORGE" "$REMOTE" "$work/other.git"
URL="ssh://$FORGE@127.0.0.1:$PORT$REMOTE"
URL_OTHER="ssh://$FORGE@127.0.0.1:$PORT$work/other.git"

# The daemon, as fence (README step 2), its keys from files private to it (step 3's
# documented alternative), lanes bound by `row-fence lane add` (step 4).
FHOME="$work/fhome"
mkdir -m 700 "$FHOME" "$FHOME/desc"
install -o "$FENCE" -g "$FENCE" -m 600 "$work/keys/push" "$FHOME/push"
install -o "$FENCE" -g "$FENCE" -m 600 "$work/keys/push-b" "$FHOME/push-b"
# docs/forge.md step 1: the board's scope (the row's own branch here is main).
mkdir -p "$FHOME/registry"
cat >"$FHOME/registry/boards.toml" <<EOF
[boards.board-1.scope]
refs = ["refs/heads/main", "refs/heads/feature/{row}", "refs/heads/feature/{row}/*"]
repositories = ["$REMOTE"]
EOF
install -o "$FENCE" -g "$FENCE" -m 600 "$work/keys/read" "$FHOME/read"
chown -R "$FENCE:$FENCE" "$FHOME"
install -d -o "$FENCE" -g "$FENCE" -m 711 "$work/broker"
AGENT="$work/broker/agent.sock"
PUSH="$work/broker/push.sock"   # docs/hard-mode.md, "The daemon pushes for the lanes"
LANES="$FHOME/broker/lanes.toml"
as_fence() {
  setpriv --reuid "$FENCE" --regid "$FENCE" --clear-groups \
    env -i PATH="$LANE_PATH" HOME="$FHOME" USER="$FENCE" ROW_FENCE_HOME="$FHOME" \
    ROW_FENCE_STORE=file "$@"
}
start_daemon() {
  # setpriv execs env, which execs the daemon: $! is the daemon's pid.
  setpriv --reuid "$FENCE" --regid "$FENCE" --clear-groups \
    env -i PATH="$LANE_PATH" HOME="$FHOME" USER="$FENCE" ROW_FENCE_HOME="$FHOME" \
    ROW_FENCE_STORE=file "$BIN/row-fence-resident" --broker-socket "$AGENT" \
    --broker-lane-key "lane-a=$FHOME/push" --broker-lane-key "lane-b=$FHOME/push-b" \
    --broker-read-key "$FHOME/read" --broker-forge-host-key "$work/host.pub" \
    --broker-forge-user "$FORGE" --push-socket "$PUSH" --push-forge "ssh://$FORGE@127.0.0.1:$PORT/" \
    >>"$work/daemon.log" 2>&1 &
  daemon_pid=$!
  for _ in $(seq 200); do [ -S "$AGENT" ] && [ -S "$FHOME/sock" ] && break; sleep 0.05; done
  [ -S "$AGENT" ] || { echo "the broker did not start:"; cat "$work/daemon.log"; exit 1; }
}
grant() { # LANE ROW DESCRIPTOR [acquire flags...]   (board-1 unless BOARD is set)
  local lane="$1" row="$2" desc="$3"; shift 3
  as_fence "$BIN/row-fence" acquire "${BOARD:-board-1}" "$row" --lane "$lane" --write-descriptor "$desc" "$@" >/dev/null 2>&1 ||
    rt_die "acquire ${BOARD:-board-1} $row for $lane failed"
}
bind() { # LANE USER WORKTREE [DESCRIPTOR]
  local args=(lane add "$1" --uid "$2" --worktree "$3")
  # docs/hard-mode.md step 4: a descriptor the lane can write (its git dir's, the default)
  # needs the binding to name the lease; every lease here is board-1/row-1.
  if [ -n "${4:-}" ]; then args+=(--descriptor "$4"); else args+=(--board board-1 --row row-1); fi
  as_fence "$BIN/row-fence" "${args[@]}" >/dev/null 2>&1 || rt_die "lane add $1 failed"
}

as_lane() { # USER DIR CMD... : CMD as USER in DIR, clean environment (no agent in it)
  local user="$1" dir="$2"; shift 2
  local short="${user#rt4b_"$t"}"
  (cd "$dir" && setpriv --reuid "$user" --regid "$user" --init-groups \
    env -i PATH="$LANE_PATH" HOME="$work/$short-home" USER="$user" \
    GIT_CONFIG_NOSYSTEM=1 GIT_AUTHOR_NAME="$user" GIT_AUTHOR_EMAIL=lane@example.invalid \
    GIT_COMMITTER_NAME="$user" GIT_COMMITTER_EMAIL=lane@example.invalid ${LANE_ENV:-} "$@")
}
worktree() { # USER -> $work/<tag>-tree: one commit, origin the forge, git wired to the broker
  local user="$1" short="${1#rt4b_"$t"}"
  local dir="$work/$short-tree" home="$work/$short-home"
  mkdir -p "$dir" "$home/.ssh"
  echo "[127.0.0.1]:$PORT $(cat "$work/keys/host.pub")" >"$home/.ssh/known_hosts"
  chown -R "$user:$user" "$dir" "$home"
  as_lane "$user" "$dir" git init -q -b main
  as_lane "$user" "$dir" git remote add origin "$URL"
  as_lane "$user" "$dir" git remote add other "$URL_OTHER"
  # The daemon pushes; the lane's own ssh (fetches) offers the read key.
  local pub="$work/read.pub"
  as_lane "$user" "$dir" "$BIN/row-fence" install broker --broker-socket "$AGENT" \
    --key-pub "$pub" --bin-dir "$BIN" --push-socket "$PUSH" --push-forge "ssh://$FORGE@127.0.0.1:$PORT/" \
    >/dev/null 2>&1 || rt_die "install broker for $user failed"
  echo "$dir"
}
commit() { # USER DIR MESSAGE -> the new commit's sha
  echo "$3 $RANDOM" >>"$2/file.txt"; chown "$1:$1" "$2/file.txt"
  as_lane "$1" "$2" git add file.txt
  as_lane "$1" "$2" git commit -q -m "$3"
  as_lane "$1" "$2" git rev-parse HEAD
}
remote_ref() { # REF [REPO] -> sha or (none)
  git -c safe.directory='*' --git-dir="${2:-$REMOTE}" rev-parse --verify -q "$1" 2>/dev/null || echo "(none)"
}
# The lane's own ssh through the broker (what a lane can always spell, wiring or not).
lane_ssh() { # USER -> an ssh command line (string) that signs through the broker with the push key
  local short="${1#rt4b_"$t"}" pub="$work/push.pub"
  [ "$1" = "$LB" ] && pub="$work/push-b.pub"
  echo "ssh -F /dev/null -o BatchMode=yes -o IdentityAgent=$AGENT -o IdentitiesOnly=yes -o IdentityFile=$pub -o UserKnownHostsFile=$work/$short-home/.ssh/known_hosts -o LogLevel=ERROR"
}
broker_counts() { # -> "signed=N refused=M" from row-fence health --prometheus (as fence)
  as_fence "$BIN/row-fence" health --prometheus 2>/dev/null |
    awk '/^row_fence_broker_signed_total /{s=$2} /^row_fence_broker_sign_refused_total /{r=$2} END{printf "signed=%s refused=%s", s, r}'
}
doctor() { # REPO: runs doctor as root over the bindings (README step 8); prints it and its exit
  local rc=0 out
  mkdir -p "$work/root-home"; printf '[safe]\n\tdirectory = *\n' >"$work/root-home/.gitconfig"
  out="$(env HOME="$work/root-home" ROW_FENCE_HOME="$FHOME" ROW_FENCE_STORE=file "$BIN/row-fence" doctor --repo "$1" \
    --broker-lanes "$LANES" --broker-socket "$AGENT" 2>&1)" || rc=$?
  printf '%s\n' "$out" | sed 's/^/      doctor| /'
  echo "      doctor| (exit $rc)"
}
verdict() { # REF EXPECTED_SHA LABEL : prints PUSH LANDED or BLOCKED for one attempt
  local got; got="$(remote_ref "$1" "${4:-$REMOTE}")"
  if [ "$got" = "$2" ]; then echo "RESULT $3: PUSH LANDED ($1 = ${got:0:12})"; else echo "RESULT $3: BLOCKED ($1 = ${got:0:12})"; fi
}

# Baseline common to every script: daemon up, lane-a holds board-1/row-1 (descriptor the
# daemon's own, outside the worktree, as scripts/demo-hard), lane-b bound with no lease yet.
rt_setup() {
  start_daemon
  TA="$(worktree "$LA")"; TB="$(worktree "$LB")"; TC="$(worktree "$LC")"
  DA="${DA:-$FHOME/desc/lane-a.json}"; DB="${DB:-$FHOME/desc/lane-b.json}"
  grant lane-a row-1 "$DA" --ttl "${TTL:-2h}"
  bind lane-a "$LA" "$TA" "$DA"
  bind lane-b "$LB" "$TB" "$DB"
  echo "== setup: forge 127.0.0.1:$PORT (MaxSessions ${MAXSESSIONS:-1}), broker $AGENT (daemon uid $(uid_of "$FENCE")), lanes $LA (lane-a), $LB (lane-b), $LC (unbound)"
}
takeover() { # lane-b takes board-1/row-1 over
  grant lane-b row-1 "$DB" --takeover
  echo "== takeover: lane-b now holds board-1/row-1; lane-a is REFUSED"
}

# docs/forge.md step 3: the forge's pre-receive hook on each repository, asking the daemon
# on the broker socket (the operator's own seeding by path is let through).
for repo in "$REMOTE" "$work/other.git"; do
  env HOME="$work" ROW_FENCE_HOME="$FHOME" "$BIN/row-fence" install forge-hook --repo "$repo" \
    --agent "$AGENT" --lane-from env:ROW_FENCE_LANE --bin-dir "$BIN" --allow-local-pushes >/dev/null ||
    rt_die "install forge-hook on $repo failed"
done
set +e
