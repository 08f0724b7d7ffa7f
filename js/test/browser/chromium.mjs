// Headless chromium for the browser tests: Debian's binary, driven by
// playwright-core, with the flags a machine without outside network needs
// (no background networking, no component updates, no sync).
import { join } from "node:path";
import { chromium } from "playwright-core";

/** The chromium binary the tests drive. */
export const CHROMIUM = process.env.PROCWIRE_CHROMIUM ?? "/usr/bin/chromium";

/**
 * Opens url in a fresh headless chromium whose profile lives in dir, closed
 * after test t: { browser, tab, logs }, logs collecting the page's console
 * and errors. options go to launchPersistentContext (a viewport, say).
 */
export async function openTab(t, dir, url, options = {}) {
  const browser = await chromium.launchPersistentContext(join(dir, "profile"), {
    executablePath: CHROMIUM,
    headless: true,
    ...options,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  t.after(() => browser.close());
  const tab = browser.pages()[0] ?? (await browser.newPage());
  const logs = [];
  tab.on("console", (m) => logs.push(m.text()));
  tab.on("pageerror", (e) => logs.push(String(e)));
  await tab.goto(url);
  return { browser, tab, logs };
}
