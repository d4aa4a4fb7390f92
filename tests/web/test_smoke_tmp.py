from tests.web.conftest import OpenPage
from tests.conftest import RunningHub

def test_smoke(hub: RunningHub, open_page: OpenPage) -> None:
    page = open_page(hub)
    print(page.text_content("#who"))
    page.fill("#message", '/call mrtr.provision {"name":"orders"}')
    page.keyboard.press("Enter")
    page.wait_for_selector(".prompt")
    print(page.inner_html("#transcript"))
    page.screenshot(path="/tmp/smoke1.png")
    page.click("text=Submit")
    print(page.text_content(".prompt .field-error"))
    page.select_option(".prompt select", "eu-west-1")
    page.click("text=Submit")
    page.wait_for_selector("text=Provisioned orders in eu-west-1.")
    print(page.get_attribute(".prompt", "data-state"))
    page.screenshot(path="/tmp/smoke2.png")
