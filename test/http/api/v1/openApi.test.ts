// GET /api/v1/openapi.json: served without credentials; covers every route of the table with the
// schemas its handler validates with; a valid OpenAPI 3.1 document (a real validator); and a
// client generated from it (openapi-typescript) type-checks calls and refuses wrong ones.
import t from 'tap';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import ts from 'typescript';
import openapiTS, { astToString } from 'openapi-typescript';
import { Validator } from '@seriousme/openapi-schema-validator';
import type { z } from 'zod';
import {
  AddSshKeyBody, CacheMetricsQuery, MetricsWindowQuery, PeriodWindowQuery, ProjectMetricsQuery, DeleteSshKeyBody, AdminSessionsQuery, AdminUsersQuery, CreateApiKeyBody, CreateCacheBody, CreateOrganizationBody, CreateProjectBody, CreateServerBody, CreateTaskActionBody, CreateTaskBody, CreateWebhookBody, DeleteApiKeyBody, EvaluateSourceBody, EvaluateTaskBody, EvaluationActionBody, BuildActionBody, EvaluationBuildsQuery, GcRequestBody, InviteBody, MemberBody, NarListQuery, NarUploadInfo, PinBody, PinListQuery, ProjectEvaluationsQuery, RegisterWorkerBody, RemoveMemberBody, RotateCacheKeyBody, SettingsPatch, SubscribeBody, UpdateCacheBody, UpdateOrganizationBody, UpdateProjectBody, UpdateServerBody, UpdateTaskActionBody, UpdateTaskBody, UpdateWebhookBody, UpstreamBody,
} from '../../../../protocol/index.js';
import { VerifyEmailQuery } from '../../../../http/api/v1/auth.js';
import { RecentQuery } from '../../../../http/api/v1/directBuilds.js';
import { AttributeAtCommitQuery, EntryPointsQuery } from '../../../../http/api/v1/evaluations.js';
import { ChunkQuery } from '../../../../http/api/v1/narUploads.js';
import { FetchQuery, UploadQuery } from '../../../../http/api/v1/sourceUploads.js';
import { EvalInputsQueryBody, TokenQuery } from '../../../../http/api/v1/evalInputs.js';
import { DeleteKeyQuery } from '../../../../http/api/v1/userKeys.js';
import { DeleteSshKeyQuery } from '../../../../http/api/v1/userSshKeys.js';
import { routeSchemas } from '../../../../http/openApiRoutes.js';
import { openApiPath } from '../../../../protocol/index.js';
import { startTestKiln } from '../../../support/kiln.js';

interface Document {
  openapi: string;
  paths: Record<string, Record<string, { responses: Record<string, unknown>; requestBody?: unknown; security: unknown[] }>>;
}

t.test('the OpenAPI document', async (t) => {
  const kiln = await startTestKiln(t);
  const res = await fetch(`${kiln.url}/api/v1/openapi.json`);
  t.equal(res.status, 200, 'no credentials needed');
  t.match(res.headers.get('content-type'), /application\/json/);
  const doc = (await res.json()) as Document;
  t.equal(doc.openapi, '3.1.0');

  t.test('every route of the table is in it, with its schemas declared', async (t) => {
    const missing: string[] = [];
    const undeclared: string[] = [];
    for (const route of kiln.routes.list()) {
      const { path } = openApiPath(route.pattern);
      if (!doc.paths[path]?.[route.method]) missing.push(`${route.method} ${route.pattern}`);
      if (!routeSchemas[`${route.method} ${route.pattern}`]) undeclared.push(`${route.method} ${route.pattern}`);
    }
    t.same(missing, [], 'routes missing from the document');
    t.same(undeclared, [], 'routes missing from http/openApiRoutes.ts');
    const known = new Set(kiln.routes.list().map((r) => `${r.method} ${r.pattern}`));
    t.same(Object.keys(routeSchemas).filter((k) => !known.has(k)), [], 'entries for routes that no longer exist');
  });

  t.test('the declared body and query schemas are the ones the handlers validate with', async (t) => {
    // The schemas handlers name in req.body()/req.query(), by the name they are exported under.
    const named = new Map<string, unknown>(Object.entries({
      AddSshKeyBody, DeleteSshKeyBody, DeleteSshKeyQuery, CacheMetricsQuery, MetricsWindowQuery, PeriodWindowQuery, ProjectMetricsQuery, AdminSessionsQuery, AdminUsersQuery, CreateApiKeyBody, CreateCacheBody, CreateOrganizationBody, CreateProjectBody, CreateServerBody, CreateTaskActionBody, CreateTaskBody, CreateWebhookBody, DeleteApiKeyBody, EvaluateSourceBody, EvaluateTaskBody, EvaluationActionBody, BuildActionBody, EvaluationBuildsQuery, GcRequestBody, InviteBody, MemberBody, NarListQuery, NarUploadInfo, PinBody, PinListQuery, ProjectEvaluationsQuery, RegisterWorkerBody, RemoveMemberBody, RotateCacheKeyBody, SettingsPatch, SubscribeBody, UpdateCacheBody, UpdateOrganizationBody, UpdateProjectBody, UpdateServerBody, UpdateTaskActionBody, UpdateTaskBody, UpdateWebhookBody, UpstreamBody, VerifyEmailQuery, RecentQuery, AttributeAtCommitQuery, EntryPointsQuery, ChunkQuery, FetchQuery, UploadQuery, EvalInputsQueryBody, TokenQuery, DeleteKeyQuery,
    }));
    let checked = 0;
    for (const route of kiln.routes.list()) {
      const source = route.handler.toString();
      const declared = routeSchemas[`${route.method} ${route.pattern}`] ?? {};
      for (const [kind, pattern] of [['body', /req\.body\((\w+)\)/], ['query', /req\.query\((\w+)\)/]] as const) {
        const used = pattern.exec(source)?.[1];
        if (!used) continue;
        checked++;
        const schema: z.ZodType | undefined = declared[kind];
        t.ok(named.has(used), `${used} is listed in this test`);
        t.equal(schema, named.get(used), `${route.method} ${route.pattern}: ${kind} is ${used}`);
      }
    }
    t.ok(checked > 40, `handlers checked against their declaration (${checked})`);
  });

  t.test('error responses carry the codes of docs/errors.md, with their statuses', async (t) => {
    const put = doc.paths['/api/v1/caches']!['put']!;
    const conflict = put.responses['409'] as { content: { 'application/json': { schema: { properties: { code: { enum: string[] } } } } } };
    t.ok(conflict.content['application/json'].schema.properties.code.enum.includes('cache_exists'));
    const unauthorized = put.responses['401'] as { content: { 'application/json': { schema: { properties: { code: { enum: string[] } } } } } };
    t.ok(unauthorized.content['application/json'].schema.properties.code.enum.includes('unauthorized'));
    t.same(put.security, [{ bearer: [] }]);
    t.same(doc.paths['/cache/{cache}/{hash}.narinfo']!['get']!.security, [{}, { cacheBasic: [] }, { bearer: [] }]);
    t.same(doc.paths['/metrics']!['get']!.security, [{ metricsToken: [] }]);
  });

  t.test('a real OpenAPI 3.1 validator accepts it', async (t) => {
    const result = await new Validator().validate(doc as unknown as Parameters<Validator["validate"]>[0]);
    t.same(result.errors ?? [], [], 'no validation errors');
    t.equal(result.valid, true);
  });

  t.test('a client generated with openapi-typescript type-checks calls and refuses wrong ones', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'kiln-openapi-'));
    t.teardown(() => rmSync(dir, { recursive: true, force: true }));
    writeFileSync(join(dir, 'kiln.ts'), astToString(await openapiTS(doc as never)));
    writeFileSync(
      join(dir, 'calls.ts'),
      [
        "import type { paths } from './kiln.js';",
        "type Json<T> = T extends { content: { 'application/json': infer B } } ? B : never;",
        "type CreateCache = Json<paths['/api/v1/caches']['put']['requestBody']>;",
        "export const create: CreateCache = { name: 'main', public: true };",
        "type CacheAnswer = Json<paths['/api/v1/caches/{cache}']['get']['responses'][200]>;",
        "export const keyOf = (a: CacheAnswer): string => a.message.public_key;",
        "type Evaluate = Json<paths['/api/v1/tasks/{project}/{task}/evaluate']['post']['requestBody']>;",
        "export const evaluate = (e: Evaluate): Evaluate => e;",
        "type Refusal = Json<paths['/api/v1/caches']['put']['responses'][409]>;",
        "export const conflict: Refusal['code'] = 'cache_exists';",
        "export type Param = paths['/api/v1/caches/{cache}']['get']['parameters']['path']['cache'];",
        '// @ts-expect-error priority is a number',
        "export const wrong: CreateCache = { name: 'main', priority: 'high' };",
        '// @ts-expect-error no such code on this route',
        "export const notACode: Refusal['code'] = 'teapot';",
      ].join('\n'),
    );
    const program = ts.createProgram([join(dir, 'calls.ts')], { strict: true, noEmit: true, module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext, target: ts.ScriptTarget.ES2022, skipLibCheck: true, types: [] });
    const problems = ts.getPreEmitDiagnostics(program).map((d) => ts.flattenDiagnosticMessageText(d.messageText, '\n'));
    t.same(problems, [], 'the generated client compiles with the calls');
  });
});
