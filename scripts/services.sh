# The machine's services that Ferry's tests and benchmarks talk to, and how to start each
# when it does not answer. Sourced by `.ci/run` and `bench/compare.sh`.

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ensure_service NAME PORT COMMAND...: nothing when something answers on PORT, else runs
# COMMAND and waits up to a minute for the port.
ensure_service() {
  local name=$1 port=$2; shift 2
  if port_open "$port"; then echo "  $name answers on $port"; return; fi
  echo "  $name is not answering on $port: starting it"
  if ! "$@" >/dev/null 2>&1; then echo "  could not start $name" >&2; return 1; fi
  for _ in $(seq 1 60); do port_open "$port" && { echo "  $name started"; return; }; sleep 1; done
  echo "  $name did not come up on $port" >&2
  return 1
}

ensure_machine_services() {
  ensure_service PostgreSQL 5432 bash -c 'pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start'
  ensure_service Redis 6379 redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no --dir /var/lib/redis --logfile /var/log/redis/ci.log
  ensure_service RabbitMQ 5672 rabbitmq-server -detached
  ensure_service NATS 4222 start-stop-daemon --start --oknodo --background --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  ensure_service MariaDB 3306 start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
}
