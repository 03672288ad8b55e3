# Debian's nginx as a remote cache on 127.0.0.1 (sourced by tests/t_remote.sh
# and bench/remote.sh): WebDAV PUT with create_full_put_path, as teams run it
# for Bazel. Needs PY (for a free port).
#
#   nginx_start DIR   start it, storing under DIR/root, its pid, logs and
#                     temporary files in DIR; sets NGINX_PORT. Non-zero
#                     with the reason in DIR/start.err when it cannot.
#   nginx_stop DIR    stop it
nginx_start() {
	ng_dir=$1
	ng_bin=$(command -v nginx || echo /usr/sbin/nginx)
	[ -x "$ng_bin" ] || { echo "nginx is not installed (scripts/install-deps.sh)" > "$ng_dir/start.err"; return 1; }
	mkdir -p "$ng_dir/root" "$ng_dir/tmp"
	for ng_try in 1 2 3; do
		NGINX_PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
		cat > "$ng_dir/nginx.conf" <<NGINX
user $(id -un) $(id -gn);
worker_processes 1;
pid $ng_dir/nginx.pid;
error_log $ng_dir/error.log;
events { worker_connections 64; }
http {
	access_log $ng_dir/access.log;
	client_body_temp_path $ng_dir/tmp/body;
	proxy_temp_path $ng_dir/tmp/proxy;
	fastcgi_temp_path $ng_dir/tmp/fastcgi;
	uwsgi_temp_path $ng_dir/tmp/uwsgi;
	scgi_temp_path $ng_dir/tmp/scgi;
	client_max_body_size 0;
	sendfile on;
	server {
		listen 127.0.0.1:$NGINX_PORT;
		root $ng_dir/root;
		location / {
			dav_methods PUT;
			create_full_put_path on;
			dav_access user:rw group:r all:r;
		}
	}
}
NGINX
		if "$ng_bin" -p "$ng_dir" -e "$ng_dir/error.log" -c "$ng_dir/nginx.conf" 2> "$ng_dir/start.err"; then
			ng_i=0
			while [ ! -s "$ng_dir/nginx.pid" ] && [ $ng_i -lt 50 ]; do
				sleep 0.1
				ng_i=$((ng_i + 1))
			done
			[ -s "$ng_dir/nginx.pid" ] && return 0
		fi
	done
	cat "$ng_dir/error.log" >> "$ng_dir/start.err" 2>/dev/null
	return 1
}

nginx_stop() {
	[ -s "$1/nginx.pid" ] && kill "$(cat "$1/nginx.pid")" 2>/dev/null
	rm -f "$1/nginx.pid"
}
