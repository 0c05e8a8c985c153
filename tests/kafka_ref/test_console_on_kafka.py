"""``ottla console`` against Apache Kafka 4.4 itself: it is a Kafka client, so its pages
work on Kafka, and the error texts the Ottla browser tests expect
(tests/integration/test_console_web.py) are the ones Kafka sends."""

from __future__ import annotations

import html
import signal
import subprocess
import sys
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from tests.helpers import free_port, terminate, wait_until
from tests.kafka_ref.cluster import KafkaCluster


def fetch(url: str, form: dict[str, str] | None = None) -> tuple[int, str]:
    """The status and the text of a page (a POST of ``form`` if given), HTML unescaped."""
    data = urllib.parse.urlencode(form).encode() if form is not None else None
    try:
        with urllib.request.urlopen(url, data=data, timeout=30) as response:
            return response.status, html.unescape(response.read().decode())
    except urllib.error.HTTPError as e:
        return e.code, html.unescape(e.read().decode())


def test_the_console_shows_kafkas_cluster_and_its_error_texts(kafka_node: KafkaCluster,
                                                               tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with open(tmp_path / "console.log", "ab") as log:
        console = subprocess.Popen(
            [sys.executable, "-m", "ottla", "console", "--bootstrap-server",
             kafka_node.bootstrap, "--port", str(port)], stdout=log, stderr=subprocess.STDOUT)
    try:
        wait_until(lambda: fetch(f"{url}/static/console.css")[0] == 200, 30, 0.2,
                   "the console")
        status, page = fetch(f"{url}/")
        assert status == 200, page
        assert "<td>Leader</td>" in page  # the combined node leads the quorum
        assert "metadata.version" in page

        status, page = fetch(f"{url}/topics", {"name": "bad name!"})
        assert status == 400
        assert ("Topic name is invalid: 'bad name!' contains one or more characters other "
                "than ASCII alphanumerics, '.', '_' and '-'") in page

        status, page = fetch(f"{url}/topics", {"name": "orders", "partitions": "2"})
        assert status == 200 and "Created topic orders." in page, page
        status, page = fetch(f"{url}/topics/orders/config",
                             {"key": "retention.ms", "value": "-5"})
        assert status == 400
        assert "Invalid value -5 for configuration retention.ms: Value must be at least -1" \
            in page
        status, page = fetch(f"{url}/topics/orders/partitions", {"total": "1"})
        assert status == 400
        assert "The topic orders currently has 2 partition(s); 1 would not be an increase." \
            in page

        status, page = fetch(f"{url}/topics/orders/produce",
                             {"key": "k", "value": '{"id": 7}', "partition": "1"})
        assert status == 200 and "Produced to partition 1 at offset 0." in page, page
        assert '<pre class="json">{\n  "id": 7\n}</pre>' in page
        status, page = fetch(f"{url}/topics/orders/messages?partition=0&start=offset"
                             "&position=5")
        assert status == 400
        assert "The requested offset is not within the range of offsets maintained by the " \
               "server." in page
        assert "Traceback" not in page
    finally:
        code, how = terminate(console, signal.SIGTERM, 10)
        assert code == 0, f"the console did not exit cleanly ({code}, {how})"
