#!/usr/bin/env bash
# A throwaway PostgreSQL cluster on loopback, for the tests and benchmarks.
#
#   eval "$(bash .ci/postgres.sh start DIR)"   # prints: export DEID_TEST_POSTGRES_DSN=...
#   bash .ci/postgres.sh stop DIR
#
# Installs Debian's postgresql when no initdb is found (needs root and the Debian mirror),
# runs the server as an unprivileged user (the `postgres` account when it exists), with
# trust authentication, a socket in DIR and a free TCP port on 127.0.0.1 only.
set -euo pipefail

cmd=${1:?usage: postgres.sh start|stop DIR}
dir=${2:?usage: postgres.sh start|stop DIR}

bindir() {
  local d
  if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
    pg_config --bindir
    return
  fi
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    [ -x "$d/initdb" ] && { echo "$d"; return; }
  done
  return 1
}

as_user() {  # run a command as the unprivileged cluster owner
  if [ "$(id -u)" = 0 ]; then runuser -u "$owner" -- "$@"; else "$@"; fi
}

case "$cmd" in
start)
  if ! bin=$(bindir); then
    echo "postgres.sh: installing Debian's postgresql" >&2
    export DEBIAN_FRONTEND=noninteractive
    # no init system here: tell the package scripts not to start the distribution's own cluster
    guard=""
    if [ ! -e /usr/sbin/policy-rc.d ]; then
      guard=/usr/sbin/policy-rc.d
      printf '#!/bin/sh\nexit 101\n' >"$guard"
      chmod 755 "$guard"
    fi
    apt-get update -qq >&2
    apt-get install -y -qq postgresql >&2
    if [ -n "$guard" ]; then rm -f "$guard"; fi
    bin=$(bindir)
  fi
  owner=$(id -un)
  if [ "$(id -u)" = 0 ]; then
    owner=postgres
    id -u postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  fi
  mkdir -p "$dir/sock"
  chmod 755 "$dir"
  [ "$(id -u)" = 0 ] && chown -R "$owner" "$dir"
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  as_user "$bin/initdb" -D "$dir/data" -A trust -U postgres -E UTF8 --locale=C --no-sync >"$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  as_user "$bin/pg_ctl" -D "$dir/data" -w -l "$dir/server.log" \
    -o "-k $dir/sock -p $port -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off" start >&2 \
    || { cat "$dir/server.log" >&2; exit 1; }
  echo "$bin" >"$dir/bindir"
  echo "export DEID_TEST_POSTGRES_DSN=postgresql://postgres@127.0.0.1:$port/postgres"
  ;;
stop)
  [ -f "$dir/bindir" ] || exit 0
  bin=$(cat "$dir/bindir")
  owner=$(stat -c %U "$dir/data")
  as_user "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
  ;;
*)
  echo "usage: postgres.sh start|stop DIR" >&2
  exit 2
  ;;
esac
