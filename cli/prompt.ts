// Questions on stderr, answers from stdin: a secret's answer is not echoed. On a terminal, readline
// runs the line editing in raw mode and echoes through its output stream, which is muted for a
// secret; from a pipe, each answer is the next line. One readline interface serves every
// question, so lines a pipe delivers together are not lost between two questions.
import { createInterface } from 'node:readline';
import { Writable } from 'node:stream';
import { UsageError } from './clientOutput.js';

interface Question {
  text: string;
  secret?: boolean;
}

export async function ask(questions: readonly Question[], input: NodeJS.ReadStream = process.stdin, output: NodeJS.WriteStream = process.stderr): Promise<string[]> {
  let muted = false;
  const echo = new Writable({
    write(chunk: Buffer | string, _encoding, done) {
      if (!muted) output.write(chunk);
      done();
    },
  });
  const terminal = input.isTTY === true;
  const rl = createInterface({ input, output: echo, terminal });
  // Ctrl-C while asking ends the command as the shell expects.
  rl.on('SIGINT', () => {
    output.write('\n');
    process.exit(130);
  });
  const lines = rl[Symbol.asyncIterator]();
  const answers: string[] = [];
  try {
    for (const q of questions) {
      output.write(q.text);
      muted = q.secret === true;
      const next = await lines.next();
      muted = false;
      if (q.secret && terminal) output.write('\n');
      if (next.done) throw new UsageError(`no answer to "${q.text.trim()}": the input ended`);
      answers.push(next.value);
    }
    return answers;
  } finally {
    rl.close();
  }
}

/** All of standard input, trimmed: a secret given as `-` stays out of the process list and the shell history. */
export async function readStdin(input: NodeJS.ReadableStream = process.stdin): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of input) chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk);
  return Buffer.concat(chunks).toString('utf8').trim();
}
