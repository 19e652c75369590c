// Browser tests: Debian's Chromium driven by playwright-core (no browser download), one browser per
// test file, axe-core's accessibility check, and screenshots for a reviewer at 1280×800.
import { existsSync, mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import AxeBuilder from '@axe-core/playwright';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import type { Test } from 'tap';
import { DEFAULT_FRONTEND_DIR } from '../../http/frontend/frontendBuild.js';

export const CHROMIUM = process.env['KILN_TEST_CHROMIUM'] ?? '/usr/bin/chromium';
/** Screenshots land here (gitignored): a reviewer looks at the pages without running anything. */
export const SCREENSHOT_DIR = fileURLToPath(new URL('../../.test-output/screenshots', import.meta.url));
export const VIEWPORT = { width: 1280, height: 800 };

/** Fails with what to run when the frontend was not built (npm ci builds it; so does npm run build:frontend). */
export function builtFrontend(): void {
  if (!existsSync(join(DEFAULT_FRONTEND_DIR, 'index.html'))) {
    throw new Error(`the web frontend is not built (${DEFAULT_FRONTEND_DIR}): run \`npm run build:frontend\` (npm ci does it too)`);
  }
}

/** One Chromium for the whole test file, closed at its end. */
export async function launchBrowser(t: Pick<Test, 'teardown'>): Promise<Browser> {
  builtFrontend();
  if (!existsSync(CHROMIUM)) throw new Error(`no Chromium at ${CHROMIUM}: install Debian's chromium (apt-get install chromium), as .ci/run does`);
  const browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-dev-shm-usage'] });
  t.teardown(() => browser.close());
  return browser;
}

export interface BrowserPage {
  page: Page;
  context: BrowserContext;
  /** console errors and CSP violations the page reported */
  problems: string[];
}

/** A fresh context (no shared storage) at 1280×800 with the page's console errors collected. */
export async function openPage(t: Pick<Test, 'teardown'>, browser: Browser): Promise<BrowserPage> {
  const context = await browser.newContext({ viewport: VIEWPORT });
  t.teardown(() => context.close());
  const page = await context.newPage();
  const problems: string[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));
  return { page, context, problems };
}

/** Writes `<name>.png` of the viewport to SCREENSHOT_DIR. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(SCREENSHOT_DIR, { recursive: true });
  const path = join(SCREENSHOT_DIR, `${name}.png`);
  await page.screenshot({ path });
  return path;
}

/** axe-core on the page as it is now: the serious and critical violations, as "id: help (n nodes)". */
export async function seriousAccessibilityViolations(page: Page): Promise<string[]> {
  const result = await new AxeBuilder({ page }).analyze();
  return result.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.help} (${v.nodes.length} nodes: ${v.nodes.slice(0, 3).map((n) => n.target.join(' ')).join(', ')})`);
}
