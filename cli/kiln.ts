import { componentLogger, createLogger, type LoadedConfig, type Logger } from '../config/index.js';
import { uploadBudgetMachine, summarizeUploadBudget } from '../actors/index.js';
import { createRootSupervisor, type Supervisor } from '../supervisors/index.js';
import { createCpuPool, openDatabase, startQueue, stopQueue, type CpuPool, type Database } from '../storage/index.js';
import { version } from './version.js';
import { authenticate, buildRoutes, startHttpServer, type HttpServer } from '../http/index.js';

/** A running kiln server: what `kiln serve` starts and what tests start in-process. */
export interface Kiln {
  readonly url: string;
  readonly port: number;
  readonly db: Database;
  readonly root: Supervisor;
  readonly log: Logger;
  stop(): Promise<void>;
}


/**
 * Starts the pieces in dependency order (database, queue, CPU pool, supervision tree, HTTP)
 * and stops them in reverse. A failure half-way stops what already started.
 */
export async function startKiln(loaded: LoadedConfig, opts: { log?: Logger } = {}): Promise<Kiln> {
  const config = loaded.values;
  const log = opts.log ?? createLogger(config);
  for (const w of loaded.warnings) log.warn(w);
  const stack: (() => Promise<void> | void)[] = [];
  const unwind = async () => {
    for (const stop of stack.reverse()) {
      try {
        await stop();
      } catch (e) {
        log.error({ err: e }, 'error while stopping');
      }
    }
    stack.length = 0;
  };
  try {
    const urlIsDefault = loaded.sourceOf('database.url').kind === 'default';
    const db = await openDatabase(config, log, { urlIsDefault });
    stack.push(() => db.close());
    const queue = await startQueue(db.url, log);
    stack.push(() => stopQueue(queue));
    const pool: CpuPool = createCpuPool();
    stack.push(() => pool.destroy());
    const root = createRootSupervisor({
      onEscalate: (error) => {
        log.fatal({ err: error }, 'the supervision tree gave up; stopping');
        process.exitCode = 70;
        void unwind();
      },
    });
    stack.push(() => root.stop());
    const uploadBudget = root.spawn({
      id: 'upload-budget',
      kind: 'upload-budget',
      logic: uploadBudgetMachine,
      input: { concurrency: config['upload.concurrency'], bytesBudget: config['upload.bytesBudget'] },
      summarize: summarizeUploadBudget,
    });
    const startedAt = new Date();
    const routes = buildRoutes({ config, db, root, uploadBudget, startedAt, version });
    const http: HttpServer = await startHttpServer({
      listenAddr: config['listenAddr'],
      port: config['port'],
      maxRequestSize: config['http.maxRequestSize'],
      trustedProxies: config['http.trustedProxies'],
      log: componentLogger(log, 'web'),
      routes,
      authenticate,
    });
    stack.push(() => http.close());
    const host = config['listenAddr'].includes(':') ? `[${config['listenAddr']}]` : config['listenAddr'];
    const url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${http.port}`;
    log.info({ url, version }, 'kiln is serving');
    return { url, port: http.port, db, root, log, stop: unwind };
  } catch (e) {
    await unwind();
    throw e;
  }
}
