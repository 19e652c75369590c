// What started an evaluation, in words, for the evaluation page and the project's list.
import type { EvaluationTrigger } from '$protocol/api/evaluations';

export function triggerText(e: { trigger: EvaluationTrigger; branch: string | null; pull_request: number | null }): string {
  switch (e.trigger) {
    case 'push':
      return e.branch === null ? 'push' : `push to ${e.branch}`;
    case 'pull_request':
      return e.pull_request === null ? 'pull request' : `pull request #${e.pull_request}`;
    case 'poll':
      return e.branch === null ? 'new commit (poll)' : `new commit on ${e.branch} (poll)`;
    case 'manual':
      return 'manual';
  }
}
