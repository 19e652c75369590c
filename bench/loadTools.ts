// nginx and wrk as child processes for the serving benches: the servers under test share the
// machine, never an event loop, and no exec blocks the process that hosts kiln.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

export interface Nginx {
  url: string;
  stop(): Promise<void>;
}

/**
 * nginx as a deployment would run it, one worker per core (`worker_processes auto`), over `root`,
 * on `port`. Debian's nginx-light (or nginx) package puts it at /usr/sbin/nginx.
 */
export async function startNginx(dir: string, root: string, port: number): Promise<Nginx> {
  const conf = join(dir, 'nginx.conf');
  await writeFile(conf, `
user root;
worker_processes auto;
pid ${dir}/nginx.pid;
error_log ${dir}/error.log error;
events { worker_connections 4096; }
http {
  access_log off;
  sendfile on;
  tcp_nopush on;
  keepalive_requests 1000000;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  types { text/x-nix-narinfo narinfo; application/x-nix-nar zst; }
  server { listen 127.0.0.1:${port}; root ${root}; location / { } }
}
`);
  const child: ChildProcess = spawn('/usr/sbin/nginx', ['-p', dir, '-c', conf, '-g', 'daemon off;'], { stdio: 'inherit' });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 100; i++) {
    if (await fetch(`${url}/`).then(() => true, () => false)) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url,
    stop: () => new Promise<void>((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGQUIT');
    }),
  };
}

export interface WrkResult {
  rps: number;
  /** requests completed in the run */
  requests: number;
  p50Ms: number;
  p99Ms: number;
  bytesPerSec: number;
  non2xx: number;
  /** connect, read, write and timeout errors wrk counted */
  socketErrors: number;
}

const unit = (value: string, units: Record<string, number>): number => {
  const m = /^([\d.]+)([a-zA-Z]*)$/.exec(value.trim());
  if (!m) throw new Error(`cannot read ${JSON.stringify(value)} from wrk`);
  return Number(m[1]) * (units[m[2]!] ?? 1);
};
const MS = { us: 0.001, ms: 1, s: 1000 };
const BYTES = { B: 1, KB: 1024, MB: 1024 ** 2, GB: 1024 ** 3 };

/**
 * wrk with --latency, two threads unless told; with `script` (WRK_PATHS_SCRIPT) each connection walks the
 * paths of `pathsFile` round-robin, without it every request asks for `url` itself.
 */
export async function wrk(url: string, opts: { connections: number; seconds: number; pathsFile?: string; script?: string; threads?: number; cpus?: string; headers?: string[] }): Promise<WrkResult> {
  const headers = (opts.headers ?? []).flatMap((h) => ['-H', h]);
  const args = [`-t${opts.threads ?? 2}`, `-c${opts.connections}`, `-d${opts.seconds}s`, '--latency', ...headers, ...(opts.script ? ['-s', opts.script] : []), url];
  // with `cpus`, wrk runs pinned there (taskset), off the CPUs of the server under test
  const [command, argv]: [string, string[]] = opts.cpus === undefined ? ['wrk', args] : ['taskset', ['-c', opts.cpus, 'wrk', ...args]];
  const { stdout } = await promisify(execFile)(command, argv, { env: { ...process.env, PATHS_FILE: opts.pathsFile ?? '' }, maxBuffer: 1 << 20 });
  const rps = Number(/Requests\/sec:\s+([\d.]+)/.exec(stdout)?.[1]);
  const requests = Number(/(\d+) requests in /.exec(stdout)?.[1]);
  const p50 = unit(/\n\s+50%\s+(\S+)/.exec(stdout)?.[1] ?? 'NaN', MS);
  const p99 = unit(/\n\s+99%\s+(\S+)/.exec(stdout)?.[1] ?? 'NaN', MS);
  const transfer = unit(/Transfer\/sec:\s+(\S+)/.exec(stdout)?.[1] ?? '0B', BYTES);
  const non2xx = Number(/Non-2xx or 3xx responses:\s+(\d+)/.exec(stdout)?.[1] ?? 0);
  const socketErrors = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(stdout)?.slice(1).reduce((a, b) => a + Number(b), 0) ?? 0;
  return { rps, requests, p50Ms: p50, p99Ms: p99, bytesPerSec: transfer, non2xx, socketErrors };
}

/** The Lua for wrk: every connection walks the paths file round-robin from a random start. */
export const WRK_PATHS_SCRIPT = `
local paths = {}
for line in io.lines(os.getenv("PATHS_FILE")) do paths[#paths + 1] = line end
local i = math.random(#paths)
request = function()
  i = i % #paths + 1
  return wrk.format("GET", paths[i])
end
`;

export const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[xs.length >> 1] ?? NaN;
