// The declarative state file (`kiln serve --state-file FILE`, `kiln state check FILE`), one JSON
// document; docs/state.md is its prose. Every reference (a project's organization, a member's
// user, …) must name something the same file declares, so `kiln state check` can tell a typo
// from a missing row without a database.
import { readFileSync } from 'node:fs';
import { z } from 'zod';
import {
  CidrBlock, Email, ProjectName, RepositoryUrl, ResourceName, Role, SubscriptionMode, Username, permissionNames,
} from '../../protocol/index.js';

const Member = z.strictObject({ user: Username, role: Role });
/** `org/project` */
const ProjectPath = z.string().regex(/^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}\/[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$/, 'must be "<organization>/<project>"');
const FilePath = z.string().min(1).max(4096);

export const StateUser = z.strictObject({
  username: Username,
  name: z.string().max(200).optional(),
  email: Email.optional(),
  /** a file holding the password; absent: the account has no password (OIDC only), or keeps the one it has */
  password_file: FilePath.optional(),
  superuser: z.boolean().default(false),
});

export const StateOrganization = z.strictObject({
  name: ResourceName,
  display_name: z.string().max(200).default(''),
  description: z.string().max(2000).default(''),
});

export const StateProject = z.strictObject({
  organization: ResourceName,
  name: ProjectName,
  repository: RepositoryUrl,
  display_name: z.string().max(200).default(''),
  description: z.string().max(2000).default(''),
  wildcard: z.string().min(1).max(1000).default('packages.*.*'),
  default_branch: z.string().min(1).max(255).nullable().default(null),
  active: z.boolean().default(true),
  /** polling (docs/git-hosts.md): seconds between polls, at least projects.minPollIntervalSecs; null: not polled */
  poll_interval_secs: z.number().int().min(1).max(86_400).nullable().default(null),
  cancel_superseded: z.boolean().default(true),
  requires_approval: z.boolean().default(false),
});

export const StateCache = z.strictObject({
  name: ResourceName,
  description: z.string().max(2000).default(''),
  public: z.boolean().default(false),
  priority: z.number().int().min(0).default(40),
  owner: Username.optional(),
});

export const StateMembership = z
  .strictObject({
    user: Username,
    role: Role,
    organization: ResourceName.optional(),
    project: ProjectPath.optional(),
    cache: ResourceName.optional(),
  })
  .refine((m) => [m.organization, m.project, m.cache].filter((x) => x !== undefined).length === 1, {
    message: 'names exactly one of organization, project or cache',
  });

export const StateSubscription = z
  .strictObject({
    project: ProjectPath.optional(),
    organization: ResourceName.optional(),
    cache: ResourceName,
    mode: SubscriptionMode.default(0),
  })
  .refine((s) => (s.project === undefined) !== (s.organization === undefined), { message: 'names exactly one of project or organization' });

export const StateApiKey = z.strictObject({
  user: Username,
  name: z.string().min(1).max(100),
  permissions: z.array(z.enum(permissionNames)).min(1, 'must name at least one permission'),
  /** a file holding the key's secret, which starts with SVC */
  secret_file: FilePath,
  project: ProjectPath.optional(),
  cache: ResourceName.optional(),
  expires_in_days: z.number().int().positive().max(36_500).optional(),
  allowed_ips: z.array(CidrBlock).default([]),
});

export const StateFile = z.strictObject({
  users: z.array(StateUser).default([]),
  organizations: z.array(StateOrganization).default([]),
  projects: z.array(StateProject).default([]),
  caches: z.array(StateCache).default([]),
  memberships: z.array(StateMembership).default([]),
  subscriptions: z.array(StateSubscription).default([]),
  api_keys: z.array(StateApiKey).default([]),
});
export type StateFile = z.infer<typeof StateFile>;

export class StateFileError extends Error {
  constructor(readonly file: string, readonly problems: string[]) {
    super(`state file ${file}:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'StateFileError';
  }
}

const lower = (s: string) => s.toLowerCase();

/** Names declared twice and references to undeclared things, each as `path: problem`. */
export function crossReferenceProblems(state: StateFile): string[] {
  const problems: string[] = [];
  const declared = (list: string[], what: string, path: string) => {
    const seen = new Set<string>();
    list.forEach((name, i) => {
      if (seen.has(lower(name))) problems.push(`${path}.${i}: ${what} "${name}" is declared twice`);
      seen.add(lower(name));
    });
    return seen;
  };
  const users = declared(state.users.map((u) => u.username), 'user', 'users');
  const orgs = declared(state.organizations.map((o) => o.name), 'organization', 'organizations');
  const projects = declared(state.projects.map((p) => `${p.organization}/${p.name}`), 'project', 'projects');
  const caches = declared(state.caches.map((c) => c.name), 'cache', 'caches');
  declared(state.api_keys.map((k) => `${k.user}/${k.name}`), 'API key', 'api_keys');
  const need = (set: Set<string>, name: string | undefined, what: string, path: string) => {
    if (name !== undefined && !set.has(lower(name))) problems.push(`${path}: ${what} "${name}" is not declared in this file`);
  };
  state.projects.forEach((p, i) => need(orgs, p.organization, 'organization', `projects.${i}.organization`));
  state.caches.forEach((c, i) => need(users, c.owner, 'user', `caches.${i}.owner`));
  state.memberships.forEach((m, i) => {
    need(users, m.user, 'user', `memberships.${i}.user`);
    need(orgs, m.organization, 'organization', `memberships.${i}.organization`);
    need(projects, m.project, 'project', `memberships.${i}.project`);
    need(caches, m.cache, 'cache', `memberships.${i}.cache`);
  });
  state.subscriptions.forEach((s, i) => {
    need(projects, s.project, 'project', `subscriptions.${i}.project`);
    need(orgs, s.organization, 'organization', `subscriptions.${i}.organization`);
    need(caches, s.cache, 'cache', `subscriptions.${i}.cache`);
  });
  state.api_keys.forEach((k, i) => {
    need(users, k.user, 'user', `api_keys.${i}.user`);
    need(projects, k.project, 'project', `api_keys.${i}.project`);
    need(caches, k.cache, 'cache', `api_keys.${i}.cache`);
  });
  return problems;
}

/** Secret files that cannot be read, or API key secrets without the SVC prefix. */
export function secretFileProblems(state: StateFile, read: (file: string) => string): string[] {
  const problems: string[] = [];
  const check = (file: string | undefined, path: string, rule?: (text: string) => string | null) => {
    if (file === undefined) return;
    try {
      const text = read(file);
      const broken = rule?.(text);
      if (broken) problems.push(`${path}: ${broken}`);
    } catch (e) {
      problems.push(`${path}: ${e instanceof Error ? e.message : String(e)}`);
    }
  };
  state.users.forEach((u, i) => check(u.password_file, `users.${i}.password_file`, (s) => (s.length >= 8 ? null : 'the password must be at least 8 characters')));
  state.api_keys.forEach((k, i) =>
    check(k.secret_file, `api_keys.${i}.secret_file`, (s) => (s.startsWith('SVC') && s.length >= 24 ? null : 'the secret must start with SVC and be at least 24 characters')));
  return problems;
}

/** Reads and validates the whole file: JSON, schema, references and secret files. Touches no database. */
export function readStateFile(file: string, read: (file: string) => string = readSecretText): StateFile {
  let raw: unknown;
  try {
    raw = JSON.parse(readFileSync(file, 'utf8'));
  } catch (e) {
    throw new StateFileError(file, [e instanceof Error ? e.message : String(e)]);
  }
  const parsed = StateFile.safeParse(raw);
  if (!parsed.success) {
    throw new StateFileError(file, parsed.error.issues.map((i) => `${i.path.length ? i.path.join('.') : '(top level)'}: ${i.message}`));
  }
  const problems = [...crossReferenceProblems(parsed.data), ...secretFileProblems(parsed.data, read)];
  if (problems.length > 0) throw new StateFileError(file, problems);
  return parsed.data;
}

/** A secret file's text without the trailing newline editors add. */
export function readSecretText(file: string): string {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new Error(`cannot read ${file}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const trimmed = text.replace(/\r?\n$/, '');
  if (trimmed === '') throw new Error(`${file} is empty`);
  return trimmed;
}
