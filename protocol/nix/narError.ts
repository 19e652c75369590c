// The one error a malformed NAR ends in. `offset` is the byte where the problem starts, so an
// operator can look at it with `xxd -s`; the message names the rule that was broken.
export class NarError extends Error {
  constructor(
    readonly offset: number,
    readonly reason: string,
  ) {
    super(`invalid NAR at byte ${offset}: ${reason}`);
    this.name = 'NarError';
  }
}

export const isNarError = (e: unknown): e is NarError => e instanceof NarError;
