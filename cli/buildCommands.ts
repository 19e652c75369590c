// `kiln build [dir]` (buildRunCommand.ts) and `kiln build show|log|closure <id>` (spec: "Evaluations and builds"): one build's record, its log
// (stored, or followed live until the build is final with --follow), and its closure as a
// size-sorted tree.
import type { Command } from 'commander';
import type { BuildView, ClosureGraphView } from '../protocol/index.js';
import { connect } from './clientConnection.js';
import { formatBytes, formatDate, formatFields, jsonOption, runClientCommand } from './clientOutput.js';
import { uuidArgument } from './evalCommands.js';
import { buildRunCommand } from './buildRunCommand.js';

const FAILED = new Set(['failed', 'aborted']);

const showBuild = (b: BuildView): string => formatFields([
  ['Build', b.build_id],
  ['Name', b.name],
  ['Derivation', b.drv_path],
  ['Attribute', b.attr ?? '-'],
  ['Status', b.status],
  ...(b.failure ? [['Failure', `${b.failure.class}${b.failure.reason ? `: ${b.failure.reason}` : ''}${b.failure.message ? ` (${b.failure.message})` : ''}`] as [string, string]] : []),
  ['Attempts', String(b.attempts)],
  ['System', b.system],
  ['Evaluation', b.evaluation_id],
  ['Log', formatBytes(b.log_bytes)],
  ['Queued', formatDate(b.queued_at)],
  ['Started', formatDate(b.started_at)],
  ['Finished', formatDate(b.finished_at)],
  ...Object.entries(b.outputs).map(([name, path]) => [`Output ${name}`, path ?? '-'] as [string, string]),
]);

/**
 * The closure as a tree from its roots, each node's dependencies below it, largest closure first.
 * A node met again is named with "(see above)" instead of its subtree again.
 */
function closureTree(graph: ClosureGraphView): string {
  const nodes = new Map(graph.nodes.map((n) => [n.id, n]));
  const dependencies = new Map<string, string[]>();
  for (const e of graph.edges) dependencies.set(e.target, [...(dependencies.get(e.target) ?? []), e.source]);
  const bySize = (ids: readonly string[]) => ids.filter((id) => nodes.has(id)).sort((a, b) => nodes.get(b)!.closure_size - nodes.get(a)!.closure_size || a.localeCompare(b));
  const lines: string[] = [];
  const shown = new Set<string>();
  const walk = (id: string, prefix: string, last: boolean, depth: number) => {
    const n = nodes.get(id)!;
    const branch = depth === 0 ? '' : last ? '└── ' : '├── ';
    const size = `${n.nar_size === null ? 'not cached' : formatBytes(n.nar_size)}, closure ${formatBytes(n.closure_size)}`;
    const again = shown.has(id);
    lines.push(`${prefix}${branch}${n.name} (${size})${again ? ' (see above)' : ''}`);
    if (again) return;
    shown.add(id);
    const children = bySize(dependencies.get(id) ?? []);
    const below = depth === 0 ? prefix : `${prefix}${last ? '    ' : '│   '}`;
    children.forEach((child, i) => walk(child, below, i === children.length - 1, depth + 1));
  };
  for (const root of bySize(graph.roots)) walk(root, '', true, 0);
  lines.push('', `${graph.node_count} paths, ${graph.edge_count} references, ${formatBytes(graph.total_size_bytes)} in all${graph.truncated ? ` (the largest ${graph.nodes.length} listed)` : ''}`);
  return lines.join('\n');
}

export function buildCommands(program: Command): void {
  const build = program.command('build').description('build the flake in a directory on the farm (kiln build [dir] --project org/project); show, log and closure: one build of an evaluation');
  buildRunCommand(build);
  // build's own --json (kiln build [dir]) takes the flag wherever it stands, so the subcommands read it there too
  const asJson = (opts: { json?: boolean }) => opts.json === true || build.opts()['json'] === true;
  build.command('show').description('a build with its status and outputs').argument('<id>').addOption(jsonOption())
    .action(async (id: string, opts: { json?: boolean }) => runClientCommand(asJson(opts), async (out) => {
      const uuid = uuidArgument(id, 'a build');
      out.result(await (await connect()).call<BuildView>('GET', `/builds/${uuid}`), showBuild);
    }));

  build.command('log').description('a build\'s log; --follow prints it as it is written until the build ends (exit 1 when it failed)').argument('<id>')
    .option('-f, --follow', 'follow the log live')
    .addOption(jsonOption())
    .action(async (id: string, opts: { follow?: boolean; json?: boolean }) => runClientCommand(asJson(opts), async (out) => {
      const uuid = uuidArgument(id, 'a build');
      const client = await connect();
      let log = '';
      // Text goes out as it comes; with --json it is gathered into the one document.
      const sink = (text: string) => (out.json ? (log += text) : process.stdout.write(text));
      if (opts.follow) await client.stream('POST', `/builds/${uuid}/log`, sink);
      else sink(await client.text(`/builds/${uuid}/log`));
      const build = await client.call<BuildView>('GET', `/builds/${uuid}`);
      if (out.json) out.result({ build_id: uuid, status: build.status, log }, () => '');
      else if (opts.follow) out.note(`kiln: build ${build.name} ${build.status}`);
      if (opts.follow && FAILED.has(build.status)) process.exitCode = 1;
    }));

  build.command('closure').description('a build\'s build-time closure, or with --runtime the runtime closure of its outputs, as a size-sorted tree').argument('<id>')
    .option('--runtime', 'the runtime closure (store path references of the cached outputs)')
    .addOption(jsonOption())
    .action(async (id: string, opts: { runtime?: boolean; json?: boolean }) => runClientCommand(asJson(opts), async (out) => {
      const uuid = uuidArgument(id, 'a build');
      const graph = await (await connect()).call<ClosureGraphView>('GET', `/builds/${uuid}/${opts.runtime ? 'runtime-closure' : 'closure'}`);
      out.result(graph, closureTree);
    }));
}
