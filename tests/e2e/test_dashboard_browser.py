"""The dashboard in a real browser: headless Chromium (Debian's package) driven by
Playwright against a live shim and worker on PostgreSQL.

An approver logs in with a token, finds the waiting run in the approval queue,
approves it from a second tab while the first watches the run page, and the
first page shows the run finish without being reloaded (it follows the run's
event stream). Model text is shown as text, never run as markup. A screenshot
is kept under test-artifacts/ (or $GATEHOUSE_TEST_ARTIFACTS)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import require_backend
from tests.support.plans import ECHO, NOTE, digest_of_plan, noop_plan
from tests.support.served import ServedShim
from tests.support.stack import Stack, running_stack

CHROMIUM = os.environ.get("GATEHOUSE_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(os.environ.get("GATEHOUSE_TEST_ARTIFACTS", "test-artifacts"))
HOSTILE = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2">'

pytest.importorskip("playwright.sync_api", reason="playwright is a dev dependency")


def _browser_or_skip() -> None:
    if Path(CHROMIUM).exists():
        return
    reason = f"no Chromium at {CHROMIUM}: run `mise run setup:browser` (Debian's chromium)"
    if os.environ.get("CI"):
        pytest.fail(reason)  # the gate must run it
    pytest.skip(reason)


@pytest.fixture
def stack(tmp_path: Path) -> Iterator[Stack]:
    require_backend("postgres")
    _browser_or_skip()
    with running_stack("postgres", tmp_path) as s:
        yield s


def test_approver_approves_in_the_browser_and_watches_the_run_finish(stack: Stack) -> None:
    from playwright.sync_api import Route, expect, sync_playwright

    plan = noop_plan(3, objective=f"dashboard {HOSTILE}")
    r = stack.submit({"recipe": "echo", "objective": HOSTILE, "mode": "run-plan", "plan": plan})
    assert r.status_code == 202, r.text
    run_id = r.json()["run_id"]
    stack.wait(run_id, {"waiting_approval"})
    digest = digest_of_plan(plan)
    token = stack.client.people.tokens["bob"]  # approver and operator, not the submitter

    with ServedShim(stack.database_url, stack.client.people.file) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 1400})
            page = context.new_page()
            page.goto(f"{url}/dashboard/approvals")
            expect(page).to_have_url(f"{url}/dashboard/login?next=/dashboard/approvals")
            page.fill("#token", token)
            page.click("#login")
            expect(page).to_have_url(f"{url}/dashboard/approvals")
            row = page.locator(f'#waiting tr[data-run-id="{run_id}"]')
            expect(row).to_have_count(1)
            row.locator("a").click()

            expect(page).to_have_title(f"{run_id} · Gatehouse")
            expect(page.locator("#run-status")).to_have_text("waiting for approval")
            expect(page.locator("#plan-digest")).to_have_text(digest)
            expect(page.locator("body")).to_have_attribute("data-stream", "open")
            page.evaluate("window.__same_page = true")  # gone if the page reloads

            # Each re-render of the run's body reaches this page late, as over a slow
            # link: the run ends while one is on its way, and the page must fetch again
            # rather than stay on a body rendered before the end.
            def late(route: Route) -> None:
                response = route.fetch()
                time.sleep(0.6)
                route.fulfill(response=response)

            page.route("**/dashboard/runs/*/body", late)

            # a second tab decides; the first only listens
            other = context.new_page()
            other.goto(f"{url}/dashboard/runs/{run_id}")
            other.fill('form[action$="/approve"] input[name="comment"]', "looks right")
            other.click("#approve")
            expect(other.locator("#flash")).to_have_text("approved by bob")

            expect(page.locator("#run-status")).to_have_text("succeeded", timeout=30_000)
            expect(page.locator("body")).to_have_attribute("data-stream", "ended")
            assert page.evaluate("window.__same_page") is True
            assert page.locator("#event-log li").count() >= 8
            steps = page.locator("#steps tbody tr")
            expect(steps).to_have_count(3)
            for i in range(3):
                expect(steps.nth(i).locator(".status")).to_have_text("succeeded")
            expect(page.locator("#ledger tbody tr")).to_have_count(3)
            expect(page.locator("#approvals tbody tr td").first).to_have_text("approved")
            expect(page.locator("#approve")).to_have_count(0)  # nothing left to decide

            # model text is text: shown literally, never run
            assert HOSTILE in page.locator("#summary").inner_text()
            assert page.evaluate("window.__pwned") is None

            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            shot = ARTIFACTS / "dashboard-run.png"
            page.screenshot(path=str(shot), full_page=True)
            assert shot.stat().st_size > 10_000
            assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert run_id in page.content()

            # replay and verify from the run page
            page.click("#replay")
            expect(page.locator("#verdict")).to_contain_text("the trace matches")
            expect(page.locator("#verdict")).to_contain_text("0 outbound")
            page.go_back()
            page.click("#verify")
            expect(page.locator("#verdict")).to_have_text("the hash chain verifies")
        finally:
            browser.close()


# Every page, as the people who use it see it, at a desktop's and a phone's width.
PAGES = [
    ("login", None, "/dashboard/login"),
    ("runs", "olga", "/dashboard"),
    ("approvals", "ann", "/dashboard/approvals"),
    ("run-waiting-approver", "ann", "/dashboard/runs/{waiting}"),
    ("run-waiting-submitter", "alice", "/dashboard/runs/{waiting}"),
    ("run-finished-operator", "olga", "/dashboard/runs/{finished}"),
    ("security", "olga", "/dashboard/security"),
    ("workers", "olga", "/dashboard/workers"),
]
WIDTHS = {"desktop": 1280, "phone": 390}


def test_every_page_fits_a_desktop_and_a_phone_and_labels_its_controls(stack: Stack) -> None:
    """Each page at 1280 and 390 px: nothing wider than the screen (a wide table
    scrolls inside itself), every form control labelled, every button named. The
    screenshots go to test-artifacts/pages/ (the ones in docs/screenshots/ were
    taken this way and looked at)."""
    from playwright.sync_api import sync_playwright

    waiting_plan = noop_plan(2, objective="rotate the staging certificate")
    waiting_plan["steps"][0]["title"] = "Check the current certificate"
    r = stack.submit({"recipe": "echo", "objective": "rotate the staging certificate",
                      "mode": "run-plan", "plan": waiting_plan})  # fmt: skip
    waiting = r.json()["run_id"]
    # The queue with more than one kind of plan: one that runs a program, and one that
    # changes a local service under a profile that needs two approvers.
    post = {
        "step_id": "post",
        "verb": "write",
        "connector_id": "local-http",
        "driver_kind": "http",
        "title": "Install the new certificate",
        "input": {
            "url": "http://127.0.0.1:9/certificates",
            "method": "POST",
            "json": {"name": "staging"},
        },
    }
    others = [
        {"objective": "inventory the build folder", "steps": [ECHO, {**NOTE, "input": {}}]},
        {"objective": "install the staging certificate", "steps": [post]},
    ]
    queued = [
        stack.submit({"recipe": "echo", "objective": plan["objective"], "mode": "run-plan",
                      "plan": plan, "policy_profile": profile}).json()["run_id"]
        for plan, profile in zip(others, ("default", "two-person"), strict=True)
    ]  # fmt: skip
    finished = stack.finished_run(2, "count the inventory")
    for run_id in [waiting, *queued]:
        stack.wait(run_id, {"waiting_approval"})
    people = stack.client.people
    folder = ARTIFACTS / "pages"
    folder.mkdir(parents=True, exist_ok=True)
    with ServedShim(stack.database_url, people.file) as url, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            for width_name, width in WIDTHS.items():
                for name, who, path in PAGES:
                    context = browser.new_context(viewport={"width": width, "height": 900})
                    page = context.new_page()
                    if who is not None:
                        page.goto(f"{url}/dashboard/login")
                        page.fill("#token", people.tokens[who])
                        page.click("#login")
                    page.goto(url + path.format(waiting=waiting, finished=finished))
                    assert page.locator("main").count() == 1, name
                    wide = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
                    assert wide <= 1, f"{name} at {width} px is {wide} px wider than the screen"
                    unlabelled = page.evaluate(
                        """[...document.querySelectorAll('input:not([type=hidden]), select')]
                        .filter(e => !e.labels?.length && !e.getAttribute('aria-label'))
                        .map(e => e.name)"""
                    )
                    assert unlabelled == [], f"{name}: controls without a label: {unlabelled}"
                    nameless = page.evaluate(
                        "[...document.querySelectorAll('button')]"
                        ".filter(b => !b.textContent.trim()).length"
                    )
                    assert nameless == 0, f"{name}: a button with no text"
                    page.screenshot(path=str(folder / f"{name}-{width_name}.png"), full_page=True)
                    context.close()
        finally:
            browser.close()
