// Arguments naming a project: `org/project` for the two-segment routes (/projects/{org}/{project}),
// and for the single-segment ones (/tasks/{project}, /projects/{project}/workers, …) the same
// `org/project` resolved to the project's UUID, or a UUID or a name only one organization uses.
import type { ProjectView } from '../protocol/index.js';
import type { ApiClient } from './apiClient.js';
import { UsageError } from './clientOutput.js';

export interface OrgProject {
  org: string;
  project: string;
}

/** `org/project`, or a usage error naming the argument. */
export function orgProject(text: string): OrgProject {
  const parts = text.split('/');
  if (parts.length !== 2 || parts[0] === '' || parts[1] === '') throw new UsageError(`${JSON.stringify(text)}: name a project as <org>/<project>`);
  return { org: parts[0]!, project: parts[1]! };
}

export const segment = (text: string): string => encodeURIComponent(text);

/** /projects/{org}/{project} */
export const projectPath = ({ org, project }: OrgProject): string => `/projects/${segment(org)}/${segment(project)}`;

/** The single-segment {project} of a route: the UUID of `org/project`, else the argument as it is (a UUID, or a unique name). */
export async function projectRef(client: ApiClient, text: string): Promise<string> {
  if (!text.includes('/')) {
    if (text === '') throw new UsageError('the project is empty');
    return text;
  }
  return (await client.call<ProjectView>('GET', projectPath(orgProject(text)))).id;
}
