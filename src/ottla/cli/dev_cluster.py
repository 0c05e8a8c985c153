"""``ottla dev-cluster --brokers 3``: a replicated cluster on this machine, for trying
replication out (docs/operations.md walks through it).

It writes one server.properties per node under ``--data-dir`` (controllers with node ids
1.., brokers 101..), formats each node's storage under one cluster id on first start
(``ottla storage format``, as an operator would), starts every node as its own
``ottla server`` process with its log in ``<data-dir>/node-<id>.log``, each serving its
metrics on a free port (``prometheus.listener``), prints the bootstrap servers and the
metrics addresses, and stops them all (SIGTERM, each shutting down cleanly) on Ctrl-C.
Run it again with the same ``--data-dir`` and the cluster comes back with its data.
"""

from __future__ import annotations

import argparse
import os
import signal
import socket
import subprocess
import sys
import time
from typing import Any

from ottla.common.uuids import random_uuid


def add_parser(sub: Any) -> None:
    p = sub.add_parser("dev-cluster", help="run a replicated cluster of local processes")
    p.add_argument("--brokers", type=int, default=3, help="broker processes (default 3)")
    p.add_argument("--controllers", type=int, default=1,
                   help="controller processes, the KRaft voters (default 1)")
    p.add_argument("--data-dir", default="./ottla-cluster",
                   help="where every node keeps its data, config and log")
    p.add_argument("--base-port", type=int, default=9092,
                   help="brokers listen on base-port, base-port+1, ...; controllers on "
                        "base-port+100, ...")
    p.set_defaults(run=run)


def free_port() -> int:
    """A port nothing listens on now (the node binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def node_properties(args: argparse.Namespace, node_id: int, data_dir: str,
                    metrics_port: int | None = None) -> dict[str, str]:
    voters = ",".join(f"{i}@127.0.0.1:{args.base_port + 99 + i}"
                      for i in range(1, args.controllers + 1))
    rf = str(min(3, args.brokers))
    props = {"node.id": str(node_id), "controller.quorum.voters": voters,
             "controller.listener.names": "CONTROLLER",
             "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
             "log.dirs": os.path.join(data_dir, "data"),
             # The controller places new topics; brokers create the offsets topic.
             "default.replication.factor": rf,
             "min.insync.replicas": str(min(2, args.brokers))}
    if metrics_port is not None:
        props["prometheus.listener"] = f"127.0.0.1:{metrics_port}"
    if node_id > 100:
        port = args.base_port + node_id - 101
        props.update({"process.roles": "broker",
                      "listeners": f"PLAINTEXT://127.0.0.1:{port}",
                      "advertised.listeners": f"PLAINTEXT://127.0.0.1:{port}",
                      "inter.broker.listener.name": "PLAINTEXT",
                      "offsets.topic.replication.factor": rf,
                      "group.initial.rebalance.delay.ms": "0"})
    else:
        props.update({"process.roles": "controller",
                      "listeners": f"CONTROLLER://127.0.0.1:{args.base_port + 99 + node_id}"})
    return props


def run(args: argparse.Namespace) -> int:
    if args.brokers < 1 or args.controllers < 1:
        print("--brokers and --controllers must be at least 1", file=sys.stderr)
        return 1
    base = os.path.abspath(args.data_dir)
    os.makedirs(base, exist_ok=True)
    id_file = os.path.join(base, "cluster-id")
    if os.path.exists(id_file):
        with open(id_file, encoding="utf-8") as f:
            cluster_id = f.read().strip()
    else:
        cluster_id = random_uuid()
        with open(id_file, "w", encoding="utf-8") as f:
            f.write(cluster_id)
    ids = [*range(1, args.controllers + 1), *range(101, 101 + args.brokers)]
    processes: list[subprocess.Popen[bytes]] = []
    metrics = {node_id: free_port() for node_id in ids}
    try:
        for node_id in ids:
            node_dir = os.path.join(base, f"node-{node_id}")
            config = os.path.join(base, f"node-{node_id}.properties")
            with open(config, "w", encoding="utf-8") as f:
                f.writelines(f"{k}={v}\n"
                             for k, v in node_properties(args, node_id, node_dir,
                                                         metrics[node_id]).items())
            formatted = subprocess.run(
                [sys.executable, "-m", "ottla", "storage", "format", "--cluster-id",
                 cluster_id, "--config", config, "--ignore-formatted"],
                capture_output=True, text=True)
            if formatted.returncode != 0:
                print(formatted.stderr, file=sys.stderr, end="")
                return 1
            with open(os.path.join(base, f"node-{node_id}.log"), "ab") as log:
                processes.append(subprocess.Popen(
                    [sys.executable, "-m", "ottla", "server", config],
                    stdout=log, stderr=subprocess.STDOUT))
        bootstrap = ",".join(f"127.0.0.1:{args.base_port + i}" for i in range(args.brokers))
        print(f"Cluster {cluster_id}: {args.controllers} controller(s), {args.brokers} "
              f"broker(s) (ids 101-{100 + args.brokers}); data and logs in {base}")
        print(f"bootstrap servers: {bootstrap}  (Ctrl-C stops every node)")
        print("metrics: " + ", ".join(f"node {node_id} http://127.0.0.1:{port}/metrics"
                                      for node_id, port in metrics.items()), flush=True)
        stop = False

        def on_signal(signum: int, frame: object) -> None:
            nonlocal stop
            stop = True
        signal.signal(signal.SIGINT, on_signal)
        signal.signal(signal.SIGTERM, on_signal)
        while not stop:
            time.sleep(0.2)
            for node_id, proc in zip(ids, processes, strict=True):
                if proc.poll() is not None and proc.returncode != 0:
                    print(f"node {node_id} exited ({proc.returncode}): see "
                          f"{base}/node-{node_id}.log", file=sys.stderr)
                    proc.returncode = 0  # reported once; the rest keep running
        return 0
    finally:
        for proc in reversed(processes):  # brokers first: a controlled shutdown each
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    proc.kill()
