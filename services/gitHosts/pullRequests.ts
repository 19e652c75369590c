// The server's half of the open_pr task action (docs/git-hosts.md, "open_pr"): once a worker has
// pushed the change to the pull request's branch, open a pull request from it, or update the one
// already open from that branch (found by `head`, as GitHub's REST API lists them), so each task
// keeps one pull request however often it runs. Calls go to gitHostApp.apiUrl as the installation.
import { z } from 'zod';
import { HostApiError, type HostApi } from './hostApi.js';

export interface PullRequestChange {
  installationId: number;
  /** owner/name */
  repository: string;
  /** the pushed branch (head) and the branch it would merge into (base) */
  branch: string;
  base: string;
  title: string;
  body: string;
}

export interface OpenedPullRequest {
  number: number;
  /** the pull request's page at the host */
  url: string;
  /** false: an open one from the branch was updated */
  created: boolean;
}

// The host's answer is shown as a link in the UI and stored (open_pr_runs: url ≤ 2000, an integer
// number): a javascript: URL or a number PostgreSQL refuses would be stored XSS, or a run whose
// end cannot be written and is taken again and again.
const PullRequestAnswer = z.object({
  number: z.number().int().positive().max(2 ** 31 - 1),
  html_url: z.url({ protocol: /^https?$/ }).max(2000),
});

function answer(data: unknown, what: string): { number: number; html_url: string } {
  const parsed = PullRequestAnswer.safeParse(data);
  if (!parsed.success) throw new HostApiError(`${what}: the host answered without a pull request number and an http(s) html_url`, 0, {});
  return parsed.data;
}

export async function openOrUpdatePullRequest(api: HostApi, change: PullRequestChange): Promise<OpenedPullRequest> {
  const [owner, repo] = change.repository.split('/') as [string, string];
  const openOne = async () => {
    const listed = await api.call(change.installationId, 'GET /repos/{owner}/{repo}/pulls', { owner, repo, head: `${owner}:${change.branch}`, state: 'open', per_page: 1 });
    return Array.isArray(listed.data) && listed.data.length > 0 ? answer(listed.data[0], 'the open pull request') : null;
  };
  const update = async (open: { number: number }): Promise<OpenedPullRequest> => {
    const updated = answer((await api.call(change.installationId, 'PATCH /repos/{owner}/{repo}/pulls/{pull_number}', {
      owner, repo, pull_number: open.number, title: change.title, body: change.body,
    })).data, 'the updated pull request');
    return { number: updated.number, url: updated.html_url, created: false };
  };
  const open = await openOne();
  if (open) return update(open);
  try {
    const made = answer((await api.call(change.installationId, 'POST /repos/{owner}/{repo}/pulls', {
      owner, repo, head: change.branch, base: change.base, title: change.title, body: change.body,
    })).data, 'the new pull request');
    return { number: made.number, url: made.html_url, created: true };
  } catch (error) {
    // 422 "a pull request already exists": another process's run of the task opened it between our
    // look and our POST (runs of two evaluations taken at once); that one is updated instead
    if (!(error instanceof HostApiError) || error.status !== 422) throw error;
    const openedMeanwhile = await openOne();
    if (!openedMeanwhile) throw error;
    return update(openedMeanwhile);
  }
}
