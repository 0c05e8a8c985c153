"""``ottla console`` in a real browser: one Ottla node, one console process and Debian's
headless Chromium driven by Playwright. A user creates a topic and produces a message in
the pages, finds it in the message browser, watches a group's lag drop as a
confluent-kafka consumer catches up, and reads Kafka's own error text for bad input; the
console keeps serving while the node is down and shows the cluster again once it is
back. Each test takes a screenshot of its page: into the run's temporary directory, or,
with ``OTTLA_CONSOLE_SCREENSHOTS=1``, into docs/images/console-*.png (the README's), so
that a test run leaves the work tree as it was."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
from confluent_kafka import (
    AcknowledgeType,
    Consumer,
    Message,
    Producer,
    ShareConsumer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
)
from playwright.sync_api import Browser, Page, expect, sync_playwright
from prometheus_client.parser import text_string_to_metric_families

from tests.helpers import OttlaProcess, free_port, terminate, wait_until

pytestmark = pytest.mark.integration

CHROMIUM = "/usr/bin/chromium"
GROUP = "billing/eu #1"
"""A group id is any string: slashes, spaces and '#' included."""
GROUP_PAGE = "/group?" + urlencode({"id": GROUP})
DOCS_IMAGES = Path(__file__).resolve().parents[2] / "docs" / "images"
IMAGES = (DOCS_IMAGES if os.environ.get("OTTLA_CONSOLE_SCREENSHOTS") == "1"
          else Path(tempfile.mkdtemp(prefix="ottla-console-screenshots-")))


class Console:
    """An ``ottla console`` process and the URL it serves (``wait`` until it does)."""

    def __init__(self, bootstrap: str, metrics_url: str, log_path: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.metrics_url = metrics_url
        self.log_path = log_path
        with open(log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ottla", "console", "--bootstrap-server", bootstrap,
                 "--port", str(self.port), "--metrics-url", metrics_url],
                stdout=log, stderr=subprocess.STDOUT)

    def wait(self) -> None:
        wait_until(self._serving, 30, 0.1, lambda: f"the console to serve:\n{self.log()}")

    def _serving(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"the console exited with {self.proc.returncode}:\n"
                               f"{self.log()}")
        with urllib.request.urlopen(f"{self.url}/static/console.css", timeout=2) as r:
            return r.status == 200

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-6000:]

    def stop(self) -> None:
        code, how = terminate(self.proc, signal.SIGTERM, 10)
        assert code == 0, f"the console did not exit cleanly ({code}, {how}):\n{self.log()}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory
          ) -> Iterator[tuple[OttlaProcess, Console]]:
    """The node and its console, started side by side (the console needs no cluster to
    start serving)."""
    base = tmp_path_factory.mktemp("console")
    metrics = free_port()
    node = OttlaProcess(str(base / "data"), overrides={
        "offsets.topic.num.partitions": "1", "prometheus.listener": f"127.0.0.1:{metrics}"})
    node.start(wait=False)
    console = Console(node.bootstrap, f"http://127.0.0.1:{metrics}/metrics",
                      base / "console.log")
    try:
        node.wait_ready()
        console.wait()
        yield node, console
    finally:
        try:
            console.stop()
        finally:
            node.stop()


@pytest.fixture(scope="module")
def node(stack: tuple[OttlaProcess, Console]) -> OttlaProcess:
    return stack[0]


@pytest.fixture(scope="module")
def console(stack: tuple[OttlaProcess, Console]) -> Console:
    return stack[1]


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium (as .ci/run does)")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


@pytest.fixture
def page(browser: Browser, console: Console) -> Iterator[Page]:
    context = browser.new_context(base_url=console.url,
                                  viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(15000)
    yield page
    context.close()


def admin(node: OttlaProcess) -> AdminClient:
    return AdminClient({"bootstrap.servers": node.bootstrap})


def shot(page: Page, name: str) -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(IMAGES / f"console-{name}.png"), full_page=True)


def no_trace(page: Page) -> None:
    assert "Traceback" not in page.content()


def test_the_cluster_page_shows_the_broker_the_controller_and_the_quorum(
        page: Page, node: OttlaProcess) -> None:
    page.goto("/")
    client = admin(node)
    cluster_id = client.describe_cluster().result(15).cluster_id
    expect(page.locator("h1")).to_contain_text(cluster_id)
    expect(page.locator("#brokers tbody tr")).to_have_count(1)
    expect(page.locator("#brokers tbody tr td").first).to_have_text("1")
    # One combined node: it is the quorum's only voter, so its leader, with no lag (as
    # kafka-metadata-quorum.sh describe --replication shows it).
    row = page.locator("#quorum tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator("td").nth(1)).to_have_text("Leader")
    expect(row.locator("td").nth(3)).to_have_text("0")
    expect(page.locator("#features")).to_contain_text("metadata.version")
    shot(page, "cluster")


def test_a_topic_created_in_the_page_exists_for_clients(page: Page, node: OttlaProcess
                                                       ) -> None:
    page.goto("/topics")
    form = page.locator("#create-topic")
    form.locator("[name=name]").fill("ui-orders")
    form.locator("[name=partitions]").fill("3")
    form.locator("[name=configs]").fill("retention.ms=86400000")
    form.locator("button").click()
    expect(page.locator(".notice")).to_have_text("Created topic ui-orders.")
    expect(page.locator("#partitions tbody tr")).to_have_count(3)
    override = page.locator("#configs tr[data-config='retention.ms']")
    expect(override).to_contain_text("86400000")
    expect(override).to_contain_text("DYNAMIC_TOPIC_CONFIG")
    topics = admin(node).list_topics(timeout=15).topics
    assert len(topics["ui-orders"].partitions) == 3
    shot(page, "topic")


def test_an_invalid_topic_name_shows_kafkas_error(page: Page) -> None:
    page.goto("/topics")
    form = page.locator("#create-topic")
    form.locator("[name=name]").fill("bad name!")
    form.locator("button").click()
    # Kafka's Topic.validate, sent back by the controller in CreateTopics.
    expect(page.locator(".error")).to_contain_text(
        "Topic name is invalid: 'bad name!' contains one or more characters other than "
        "ASCII alphanumerics, '.', '_' and '-'")
    no_trace(page)
    shot(page, "invalid-topic")


def test_a_config_out_of_range_shows_kafkas_error_and_a_valid_one_is_set(
        page: Page, node: OttlaProcess) -> None:
    client = admin(node)
    client.create_topics([NewTopic("configured", 1, 1)])["configured"].result(15)
    page.goto("/topics/configured")
    form = page.locator("#edit-config")
    form.locator("[name=key]").fill("retention.ms")
    form.locator("[name=value]").fill("-5")
    form.get_by_role("button", name="Set", exact=True).click()
    # LogConfig defines retention.ms with atLeast(-1); ConfigException's text.
    expect(page.locator(".error")).to_contain_text(
        "Invalid value -5 for configuration retention.ms: Value must be at least -1")
    no_trace(page)
    form = page.locator("#edit-config")
    form.locator("[name=key]").fill("retention.ms")
    form.locator("[name=value]").fill("3600000")
    form.get_by_role("button", name="Set", exact=True).click()
    expect(page.locator(".notice")).to_have_text("Set retention.ms=3600000.")
    resource = ConfigResource(ConfigResource.Type.TOPIC, "configured")
    configs = client.describe_configs([resource])[resource].result(15)
    assert configs["retention.ms"].value == "3600000"


def test_partitions_added_and_a_topic_deleted_in_the_page(page: Page, node: OttlaProcess
                                                           ) -> None:
    client = admin(node)
    client.create_topics([NewTopic("short-lived", 1, 1)])["short-lived"].result(15)
    page.goto("/topics/short-lived")
    form = page.locator("#add-partitions")
    form.locator("[name=total]").fill("4")
    form.locator("button").click()
    expect(page.locator(".notice")).to_have_text("short-lived now has 4 partitions.")
    expect(page.locator("#partitions tbody tr")).to_have_count(4)
    # Fewer partitions than the topic has: Kafka's ReplicationControlManager refuses it.
    form = page.locator("#add-partitions")
    form.locator("[name=total]").fill("2")
    form.locator("button").click()
    expect(page.locator(".error")).to_contain_text(
        "The topic short-lived currently has 4 partition(s); 2 would not be an increase.")
    no_trace(page)
    page.once("dialog", lambda dialog: dialog.accept())
    page.locator("#delete-topic button").click()
    expect(page.locator(".notice")).to_have_text("Deleted topic short-lived.")
    expect(page.locator("#topics")).not_to_contain_text("short-lived")
    wait_until(lambda: "short-lived" not in client.list_topics(timeout=15).topics, 15, 0.2,
               "the topic to be gone for a Kafka client")


def test_a_message_produced_in_the_page_is_found_in_the_browser(
        page: Page, node: OttlaProcess) -> None:
    client = admin(node)
    client.create_topics([NewTopic("ui-events", 2, 1)])["ui-events"].result(15)
    page.goto("/topics/ui-events/messages")
    form = page.locator("#produce")
    form.locator("[name=partition]").fill("1")
    form.locator("[name=key]").fill("order-7")
    form.locator("[name=value]").fill('{"id": 7, "items": ["tea", "cake"], "paid": true}')
    form.locator("[name=headers]").fill("source=console")
    form.locator("button").click()
    expect(page.locator(".notice")).to_have_text("Produced to partition 1 at offset 0.")
    row = page.locator("#messages tbody tr")
    expect(row).to_have_count(1)
    expect(row.locator(".key")).to_have_text("order-7")
    # The JSON value pretty-printed, two spaces an indent.
    assert row.locator("pre.json").inner_text() == json.dumps(
        {"id": 7, "items": ["tea", "cake"], "paid": True}, indent=2)
    expect(row.locator(".headers")).to_have_text("source: console")
    # A Kafka client reads the same record where the page said it went.
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": "check"})
    consumer.assign([TopicPartition("ui-events", 1, 0)])
    message = wait_until(lambda: consumer.poll(0.5), 15, 0, "the produced record")
    consumer.close()
    assert (message.key(), message.headers()) == (b"order-7", [("source", b"console")])
    assert json.loads(message.value()) == {"id": 7, "items": ["tea", "cake"], "paid": True}
    # All partitions from the latest, a binary value in hex, a filter, the download.
    producer = Producer({"bootstrap.servers": node.bootstrap})
    producer.produce("ui-events", value=b"\x00\x01\xfe\xff", key=b"bin", partition=0)
    producer.produce("ui-events", value=b"plain text here", key=b"txt", partition=0)
    producer.flush(15)
    page.goto("/topics/ui-events/messages?start=latest")
    expect(page.locator("#messages tbody tr")).to_have_count(3)
    expect(page.locator("#messages tr", has_text="bin").locator("code.hex")).to_have_text(
        "00 01 fe ff")
    shot(page, "messages")
    # The topic's bytes on disk, as DescribeLogDirs tells them, in the list of topics.
    page.goto("/topics")
    size = page.locator("#topics tr", has=page.get_by_role("link", name="ui-events",
                                                           exact=True)).locator("td.size")
    expect(size).to_have_text(re.compile(r"^\d+(\.\d)? (Bytes|KiB)$"))
    expect(size).not_to_have_text("0 Bytes")
    # RFC 9535 JSONPath: only JSON values it selects something in.
    page.goto("/topics/ui-events/messages?" + urlencode({"jsonpath": "$.items[?@ == 'cake']"}))
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    expect(page.locator("#messages .key")).to_have_text("order-7")
    page.goto("/topics/ui-events/messages?" + urlencode({"jsonpath": "$.items[?@ == 'pie']"}))
    expect(page.locator("#messages tbody tr")).to_have_text("No messages here.")
    page.goto("/topics/ui-events/messages?" + urlencode({"jsonpath": "$.["}))
    expect(page.locator(".error")).to_contain_text("Invalid JSONPath '$.['")
    page.goto("/topics/ui-events/messages?contains=plain")
    expect(page.locator("#messages tbody tr")).to_have_count(1)
    with page.expect_download() as download:
        page.locator("#download").click()
    lines = Path(download.value.path()).read_text().splitlines()
    assert [json.loads(line)["value"] for line in lines] == ["plain text here"]


def test_a_non_existent_offset_shows_kafkas_error(page: Page) -> None:
    page.goto("/topics/ui-orders/messages?partition=0&start=offset&position=1000")
    # Errors.OFFSET_OUT_OF_RANGE's message.
    expect(page.locator(".error")).to_contain_text(
        "The requested offset is not within the range of offsets maintained by the server.")
    no_trace(page)


def test_a_groups_lag_drops_to_zero_once_its_consumer_catches_up(
        page: Page, node: OttlaProcess) -> None:
    client = admin(node)
    client.create_topics([NewTopic("lagged", 2, 1)])["lagged"].result(15)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(10):
        producer.produce("lagged", value=f"record {i}".encode(), partition=i % 2)
    producer.flush(15)
    consumer = Consumer({"bootstrap.servers": node.bootstrap, "group.id": GROUP,
                         "enable.auto.commit": False, "auto.offset.reset": "earliest"})
    # Committed 1 of 5 on each partition: lag 4 + 4, as kafka-consumer-groups.sh says.
    consumer.commit(offsets=[TopicPartition("lagged", 0, 1), TopicPartition("lagged", 1, 1)],
                    asynchronous=False)

    def lag_shows(expected: str) -> bool:
        page.goto(GROUP_PAGE)
        return page.locator("#total-lag").inner_text() == expected

    wait_until(lambda: lag_shows("8"), 20, 0.2, "a lag of 8")
    page.goto("/groups")
    page.get_by_role("link", name=GROUP, exact=True).click()
    expect(page.locator("h1 code")).to_have_text(GROUP)
    expect(page.locator("#lag td.lag")).to_have_text(["4", "4"])
    shot(page, "group")
    consumer.subscribe(["lagged"])
    seen = 0

    def caught_up() -> bool:
        nonlocal seen
        seen += len([m for m in consumer.consume(10, 0.5) if m.error() is None])
        return seen >= 8

    wait_until(caught_up, 20, 0, "the consumer to read the 8 records after the commits")
    consumer.commit(asynchronous=False)
    wait_until(lambda: lag_shows("0"), 20, 0.2, "a lag of 0")
    expect(page.locator("#lag td.lag")).to_have_text(["0", "0"])
    expect(page.locator("#state")).to_have_text("Stable")
    expect(page.locator("#members tbody tr")).to_have_count(1)
    consumer.close()
    # An inactive group's offsets reset to the earliest: the lag is back to all 10.
    wait_until(lambda: lag_shows("0") and page.locator("#state").inner_text() == "Empty",
               30, 0.2, "the group to be empty once its consumer left")
    form = page.locator("#reset")
    form.locator("[name=scenario]").select_option("to_earliest")
    form.locator("button").click()
    expect(page.locator(".notice")).to_have_text("Reset 2 partition(s) to earliest.")
    expect(page.locator("#total-lag")).to_have_text("10")


def test_a_share_groups_start_offset_and_lag_follow_its_consumer(
        page: Page, node: OttlaProcess) -> None:
    client = admin(node)
    client.create_topics([NewTopic("jobs", 1, 1)])["jobs"].result(15)
    # share.auto.offset.reset=earliest: records produced before the member's first fetch
    # are delivered to it.
    resource = ConfigResource(ConfigResource.Type.GROUP, "workers", incremental_configs=[
        ConfigEntry("share.auto.offset.reset", "earliest",
                    incremental_operation=AlterConfigOpType.SET)])
    client.incremental_alter_configs([resource])[resource].result(15)
    producer = Producer({"bootstrap.servers": node.bootstrap})
    for i in range(6):
        producer.produce("jobs", str(i).encode(), partition=0)
    assert producer.flush(15) == 0
    consumer = ShareConsumer({"bootstrap.servers": node.bootstrap, "group.id": "workers",
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe(["jobs"])
    try:
        got: list[Message] = []

        def received() -> bool:
            got.extend(m for m in consumer.poll(0.3) or [] if m.error() is None)
            return len(got) >= 6

        wait_until(received, 30, 0, "the share consumer to receive the 6 records")
        # Delivered, not yet acknowledged: the start offset 0 and all 6 lagging, as
        # kafka-share-groups.sh --describe shows them (KIP-1226).
        page.goto("/share-groups")
        expect(page.locator("#share-groups")).to_contain_text("workers")
        page.get_by_role("link", name="workers", exact=True).click()
        expect(page.locator("#state")).to_have_text("Stable")
        expect(page.locator("#members tbody tr")).to_have_count(1)
        row = page.locator("#share-offsets tbody tr td")
        expect(row).to_have_text(["jobs", "0", "0", "6"])
        for m in got:
            consumer.acknowledge(m, AcknowledgeType.ACCEPT)
        assert all(e is None for e in consumer.commit_sync(15).values())
        page.reload()
        # Stored with the start offset they found, as Kafka stores them (the next write
        # would carry 6): nothing lags.
        expect(row).to_have_text(["jobs", "0", "0", "0"])
        shot(page, "share-group")
        # kafka-share-groups.sh refuses a reset while the group has a member.
        form = page.locator("#reset")
        form.locator("[name=scenario]").select_option("to_earliest")
        form.locator("button").click()
        expect(page.locator(".error")).to_contain_text("Share group 'workers' is not empty.")
        expect(row).to_have_text(["jobs", "0", "0", "0"])
    finally:
        consumer.close()
    # Once it has left, the reset to the earliest offset makes all 6 records lag again.

    def left() -> bool:
        page.goto("/share-group?id=workers")
        return page.locator("#state").inner_text() == "Empty"
    wait_until(left, 30, 0.5, "the share group to be empty once its consumer closed")
    form = page.locator("#reset")
    form.locator("[name=scenario]").select_option("to_earliest")
    form.locator("button").click()
    expect(page.locator(".notice")).to_have_text("Reset 1 share-partition(s) to earliest.")
    expect(page.locator("#share-offsets tbody tr td")).to_have_text(["jobs", "0", "0", "6"])


def records_in(metrics_url: str) -> float:
    """The node's own count of records in (the all-topics series)."""
    with urllib.request.urlopen(metrics_url, timeout=10) as response:
        text = response.read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == "kafka_server_brokertopicmetrics_messagesin_total"
               and "topic" not in sample.labels)


def test_the_charts_count_the_records_produced_and_show_their_latency(
        page: Page, node: OttlaProcess, console: Console) -> None:
    client = admin(node)
    client.create_topics([NewTopic("charted", 1, 1)])["charted"].result(15)

    def chart(name: str, attribute: str) -> float:
        return float(page.locator(f"figure[data-chart='{name}']").get_attribute(attribute))

    def scraped_after(moment: float) -> bool:
        page.goto("/charts")
        return float(page.locator(".charts").get_attribute("data-last-scrape")) > moment

    # Every record of the earlier tests was acknowledged, so a scrape from now on counts
    # them all: the window's count of records in moves by what is produced here. On a
    # loaded machine the producer may send a batch again after a timeout, and the node
    # counts it again (as Kafka's does): the chart then shows what the node counted.
    node_before = records_in(console.metrics_url)
    started = time.time()
    wait_until(lambda: scraped_after(started), 15, 0.3, "a scrape")
    before = chart("Records in", "data-total")
    producer = Producer({"bootstrap.servers": node.bootstrap, "linger.ms": 5})
    for _ in range(500):
        producer.produce("charted", b"x" * 100, partition=0)
    assert producer.flush(15) == 0
    produced = time.time()
    wait_until(lambda: scraped_after(produced), 15, 0.3, "a scrape after the records")
    node_counted = records_in(console.metrics_url) - node_before
    assert 500 <= chart("Records in", "data-total") - before <= node_counted
    assert chart("Records in", "data-peak") > 0
    assert chart("Bytes in", "data-peak") > 0
    assert chart("Produce latency, 99th percentile", "data-peak") > 0
    expect(page.locator("figure.chart polyline").first).to_have_attribute(
        "points", re.compile(r"\d"))
    shot(page, "charts")


def test_the_theme_toggle_switches_to_dark_and_remembers_it(page: Page) -> None:
    page.goto("/topics")
    page.evaluate("localStorage.setItem('ottla-theme', 'light')")
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "light"
    page.locator("#theme-toggle").click()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    page.reload()
    assert page.evaluate("document.documentElement.dataset.theme") == "dark"
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == "rgb(15, 20, 25)"
    shot(page, "dark")


def test_the_console_outlives_the_cluster_and_shows_it_again(
        page: Page, node: OttlaProcess, console: Console) -> None:
    node.stop()
    page.goto("/")
    expect(page.locator(".error")).to_contain_text(
        f"The cluster at {node.bootstrap} is not reachable")
    no_trace(page)
    shot(page, "unavailable")
    for path in ("/topics", "/topics/ui-orders/messages", "/groups", GROUP_PAGE):
        assert page.goto(path).status == 503
        expect(page.locator(".error")).to_contain_text("is not reachable")
    node.start()
    wait_until(lambda: page.goto("/topics/ui-orders").status == 200, 30, 0.5,
               "the topic page once the node is back")
    expect(page.locator("#partitions tbody tr")).to_have_count(3)
    # The group's coordinator loads __consumer_offsets again before it answers.
    wait_until(lambda: page.goto(GROUP_PAGE).status == 200, 30, 0.5,
               "the group page once the node is back")
    expect(page.locator("#total-lag")).to_have_text("10")
    assert console.proc.poll() is None
