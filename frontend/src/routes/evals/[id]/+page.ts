// Starts the evaluation page's two first reads (the evaluation, the first page of its builds) the
// moment the router knows the route, in parallel, before the page's component mounts.
import { get, segment } from '$lib/api';
import { PagedBuilds } from '$lib/eval/pagedBuilds.svelte';
import { sessionToken } from '$lib/session';
import type { EvaluationView } from '$protocol/api/evaluations';
import type { PageLoad } from './$types';

export const load: PageLoad = ({ params }) => {
  const builds = new PagedBuilds(params.id);
  // Without a session the layout is sending the visitor to sign in: nothing to read.
  if (sessionToken() === null) return { builds, evaluation: null };
  builds.setFilter(null, '');
  const evaluation = get<EvaluationView>(`/evals/${segment(params.id)}`);
  // The page reports a failure when it takes the answer; until then it is not unhandled.
  evaluation.catch(() => undefined);
  return { builds, evaluation };
};
