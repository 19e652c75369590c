// A progress bar on stderr, drawn only when stderr is a terminal (CI logs get no \r noise), and
// redrawn at most a few times a second.
export interface Progress {
  update(done: number): void;
  finish(): void;
}

const silent: Progress = { update: () => undefined, finish: () => undefined };

export function progressBar(label: string, total: number, stream: NodeJS.WriteStream = process.stderr): Progress {
  if (!stream.isTTY) return silent;
  const width = 30;
  let last = 0;
  const draw = (done: number) => {
    const fraction = total > 0 ? Math.min(1, done / total) : 1;
    const filled = Math.round(fraction * width);
    const mib = (n: number) => (n / 1048576).toFixed(1);
    stream.write(`\r[${'#'.repeat(filled)}${'-'.repeat(width - filled)}] ${(fraction * 100).toFixed(0).padStart(3)}% ${mib(done)}/${mib(total)} MiB ${label}`.slice(0, (stream.columns ?? 120) - 1));
  };
  return {
    update(done) {
      const now = Date.now();
      if (now - last < 200 && done < total) return;
      last = now;
      draw(done);
    },
    finish() {
      draw(total);
      stream.write('\n');
    },
  };
}
