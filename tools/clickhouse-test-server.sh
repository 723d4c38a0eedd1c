#!/usr/bin/env bash
# Starts a throwaway clickhouse-server (Debian's package) on 127.0.0.1 with its
# data in DIR, and waits until it answers. For CI and tests only.
#   tools/clickhouse-test-server.sh DIR TCP_PORT HTTP_PORT [EXTRA_XML_FILE]
# EXTRA_XML_FILE is spliced into config.xml (e.g. <remote_servers> for shards);
# $CLICKHOUSE_PROFILE_XML into the default user's profile (settings such as
# <load_balancing>in_order</load_balancing>).
# The server's pid is written to DIR/server.pid.
set -euo pipefail
dir=$1 tcp=$2 http=$3 extra=${4:-}
bin=$(command -v clickhouse-server || true)
if [ -z "$bin" ]; then
	echo "clickhouse-server not found; install it with: apt-get install -y clickhouse-server" >&2
	exit 1
fi
mkdir -p "$dir/data" "$dir/tmp" "$dir/user_files" "$dir/format_schemas"
extra_xml=""
if [ -n "$extra" ]; then extra_xml=$(cat "$extra"); fi
cat > "$dir/config.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <logger>
        <level>warning</level>
        <log>$dir/server.log</log>
        <errorlog>$dir/error.log</errorlog>
        <console>false</console>
    </logger>
    <listen_host>127.0.0.1</listen_host>
    <http_port>$http</http_port>
    <tcp_port>$tcp</tcp_port>
    <max_connections>256</max_connections>
    <keep_alive_timeout>3</keep_alive_timeout>
    <max_concurrent_queries>100</max_concurrent_queries>
    <uncompressed_cache_size>1073741824</uncompressed_cache_size>
    <mark_cache_size>268435456</mark_cache_size>
    <path>$dir/data/</path>
    <tmp_path>$dir/tmp/</tmp_path>
    <user_files_path>$dir/user_files/</user_files_path>
    <format_schema_path>$dir/format_schemas/</format_schema_path>
    <users_config>$dir/users.xml</users_config>
    <default_profile>default</default_profile>
    <default_database>default</default_database>
    <timezone>UTC</timezone>
    $extra_xml
</yandex>
XML
cat > "$dir/users.xml" <<XML
<?xml version="1.0"?>
<yandex>
    <profiles><default><max_memory_usage>4000000000</max_memory_usage>${CLICKHOUSE_PROFILE_XML:-}</default></profiles>
    <users>
        <default>
            <password></password>
            <networks><ip>::1</ip><ip>127.0.0.1</ip></networks>
            <profile>default</profile>
            <quota>default</quota>
        </default>
    </users>
    <quotas><default><interval><duration>3600</duration><queries>0</queries><errors>0</errors><result_rows>0</result_rows><read_rows>0</read_rows><execution_time>0</execution_time></interval></default></quotas>
</yandex>
XML
"$bin" --config-file="$dir/config.xml" > "$dir/stdout.log" 2>&1 &
echo $! > "$dir/server.pid"
for _ in $(seq 1 150); do
	if curl -sf "http://127.0.0.1:$http/" > /dev/null 2>&1; then
		exit 0
	fi
	if ! kill -0 "$(cat "$dir/server.pid")" 2>/dev/null; then
		echo "clickhouse-server exited; see $dir/error.log:" >&2
		tail -20 "$dir/error.log" "$dir/stdout.log" >&2 || true
		exit 1
	fi
	sleep 0.2
done
echo "clickhouse-server did not answer on 127.0.0.1:$http in 30s" >&2
exit 1
