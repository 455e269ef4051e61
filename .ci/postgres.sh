#!/usr/bin/env bash
# A throwaway PostgreSQL for the tests: installs Debian's server if missing,
# runs initdb and the server in a temporary directory (as the postgres user
# when we are root: PostgreSQL refuses to run as root), listening on
# 127.0.0.1 only, and exports SKED_TEST_POSTGRES naming a fresh database.
#
# Sourced, the server is stopped and removed when the calling script
# exits (.ci/run does not source it: the tests start their own, see
# internal/testpg). Run directly, it stays up and the script prints the
# line to export:
#
#   eval "$(.ci/postgres.sh)"     # then: go test ./db/postgres/...
#
# A SKED_TEST_POSTGRES that is already set is kept and nothing is started.

sked_pg_main() {
	if [[ -n "${SKED_TEST_POSTGRES:-}" ]]; then
		echo "export SKED_TEST_POSTGRES='$SKED_TEST_POSTGRES'"
		return 0
	fi
	local bin
	bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
	if [[ -z "$bin" ]]; then
		echo "postgres.sh: installing postgresql" >&2
		apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
		bin=$(ls -d /usr/lib/postgresql/*/bin | sort -V | tail -n 1)
	fi

	# as runs a command as the server's owner: postgres when we are root.
	local -a as=()
	if [[ $(id -u) -eq 0 ]]; then
		as=(runuser -u postgres --)
	fi
	local dir
	dir=$(mktemp -d /tmp/sked-pg.XXXXXX)
	[[ ${#as[@]} -eq 0 ]] || chown postgres: "$dir"

	# The first free port from 55432 up.
	local port=55432
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		port=$((port + 1))
	done

	# fsync off: the data directory is thrown away after the run, and the
	# tests do not pull the plug on it.
	"${as[@]}" "$bin/initdb" -D "$dir/data" -U postgres -A trust --no-sync -E UTF8 >"$dir/initdb.log" 2>&1 ||
		{ cat "$dir/initdb.log" >&2; return 1; }
	"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start -o \
		"-c listen_addresses=127.0.0.1 -p $port -k $dir -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off" >&2 ||
		{ cat "$dir/server.log" >&2; return 1; }
	"${as[@]}" "$bin/createdb" -h 127.0.0.1 -p "$port" -U postgres sked_test >&2

	SKED_PG_DIR=$dir
	SKED_PG_CTL=("${as[@]}" "$bin/pg_ctl" -D "$dir/data")
	export SKED_TEST_POSTGRES="postgres://postgres@127.0.0.1:$port/sked_test?sslmode=disable"
	echo "postgres.sh: server in $dir on 127.0.0.1:$port" >&2
	echo "export SKED_TEST_POSTGRES='$SKED_TEST_POSTGRES'"
}

sked_pg_stop() {
	[[ -n "${SKED_PG_DIR:-}" ]] || return 0
	"${SKED_PG_CTL[@]}" stop -m fast >/dev/null 2>&1 || true
	rm -rf "$SKED_PG_DIR"
}

if [[ "${BASH_SOURCE[0]}" != "$0" ]]; then
	sked_pg_main >/dev/null
	trap sked_pg_stop EXIT
else
	set -euo pipefail
	sked_pg_main
fi
