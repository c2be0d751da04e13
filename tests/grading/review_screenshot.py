"""The README's picture of the review page, made from a real graded class.

    python tests/grading/review_screenshot.py lablib/grading/review/page/screenshot.png

Makes the class of 32 Lab 2 submissions of ``written_class.py`` in a temporary folder,
grades it (``lablib grade``), starts ``lablib review`` with the solution's model answers,
grades three answers of section 8's question by keys in headless Chromium and saves the
page. Needs the dev install (Lab 2's TensorFlow Model Garden, Playwright, Chromium).
"""

from __future__ import annotations

import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

from playwright.sync_api import expect, sync_playwright

from written_class import SOLUTION, make_class


def main(target: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        make_class(tmp / "class", 32)
        lablib = [sys.executable, "-m", "lablib.cli"]
        subprocess.run(
            [*lablib, "grade", "lab2", "class", "-o", "out", "--roster", "roster.csv", "--quiet"],
            cwd=tmp,
            check=True,
        )
        review = subprocess.Popen(
            [
                *lablib,
                "review",
                "lab2",
                "out",
                "--no-browser",
                "--grader",
                "ta-anna",
                "--solution",
                str(SOLUTION),
            ],
            cwd=tmp,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            url = re.search(r"http://\S+", review.stdout.readline()).group(0)
            with sync_playwright() as p:
                browser = p.chromium.launch(
                    executable_path=chromium,
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
                )
                page = browser.new_page(viewport={"width": 1400, "height": 1500})
                page.goto(url + "#find_error")
                page.wait_for_selector(".answer.focused")
                last = str(page.locator("#items li").count())  # "No answer."
                for keys in (["1", "2"], ["1"], ["2", "3"]):
                    blank = page.locator(".answer.focused .empty").count()
                    for key in [last] if blank else keys:
                        page.keyboard.press(key)
                        expect(page.locator("#status")).to_have_text("saved")
                    page.keyboard.press("j")
                page.locator("#q-model-box summary").click()
                page.mouse.wheel(0, -20000)
                page.wait_for_timeout(500)
                page.screenshot(path=target)
                browser.close()
        finally:
            review.send_signal(2)
            review.communicate(timeout=120)
    print(f"wrote {target}")


if __name__ == "__main__":
    main(sys.argv[1])
