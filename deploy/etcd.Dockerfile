# etcd for docker-compose.yml's etcd profile, from Debian's package.
FROM debian:bookworm-slim
RUN apt-get update && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server \
 && rm -rf /var/lib/apt/lists/*
EXPOSE 2379
