// A kiln worker started in this process (startWorker) against a fresh /proto test server, with
// real Nix (NIX_REMOTE=local, TEST_NIX_CONFIG), both stopped at the test's end; answers the
// worker, the server and the worker's session on it.
import { join } from 'node:path';
import { pino } from 'pino';
import { loadConfig, type Logger, type OptionPath } from '../../config/index.js';
import { startWorker } from '../../worker/index.js';
import { startProtoServer, type ProtoTestServer, type WorkerSession } from './protoServer.js';
import { TEST_NIX_CONFIG } from './workerProcess.js';

type Worker = Awaited<ReturnType<typeof startWorker>>;

export async function startInProcessWorker(
  t: { teardown(fn: () => Promise<void>): void }, dir: string, overrides: Partial<Record<OptionPath, unknown>> = {}, options: { log?: Logger; env?: NodeJS.ProcessEnv } = {},
): Promise<{ worker: Worker; server: ProtoTestServer; session: WorkerSession }> {
  const server = await startProtoServer({ openModeProjects: [] });
  const config = loadConfig({
    scope: 'worker',
    env: {},
    overrides: { 'worker.serverUrl': server.url, 'worker.baseDir': join(dir, 'worker'), 'worker.gcrootsDir': join(dir, 'gcroots'), ...overrides },
  }).values;
  const worker = await startWorker(config, { log: options.log ?? pino({ level: process.env['KILN_TEST_LOG'] ? 'debug' : 'silent' }), software: 'kiln test', env: { ...process.env, NIX_REMOTE: 'local', NIX_CONFIG: TEST_NIX_CONFIG, ...options.env } });
  t.teardown(async () => {
    await worker.stop();
    await server.close();
  });
  return { worker, server, session: await server.nextWorker() };
}
