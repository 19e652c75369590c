// How the workers kiln runs for build servers (cli/buildServerWorkers.ts) get past the /proto
// handshake: each launch is admitted here with a fresh random token and the projects it builds
// for, and presents that token (a `*:<token>` peers file) when the handshake challenges it. The
// passes live in the memory of the process that launched the worker, which is the process it
// connects to on loopback; nothing is stored, so a restart issues new ones.
import { randomBytes, timingSafeEqual } from 'node:crypto';

interface Pass {
  token: Buffer;
  projects: readonly string[];
}

export class BuildServerPasses {
  private readonly passes = new Map<string, Pass>();

  /** A new token for this worker id, replacing any earlier one; the worker proves it holds it. */
  admit(workerId: string, projects: readonly string[]): string {
    const token = randomBytes(48).toString('base64url');
    this.passes.set(workerId.toLowerCase(), { token: Buffer.from(token), projects: [...projects] });
    return token;
  }

  revoke(workerId: string): void {
    this.passes.delete(workerId.toLowerCase());
  }

  /** The projects to challenge this worker with; undefined when it holds no pass. */
  projectsFor(workerId: string): readonly string[] | undefined {
    return this.passes.get(workerId.toLowerCase())?.projects;
  }

  /** The pass's projects the pass's token was presented for; undefined when the worker holds no pass. */
  verify(workerId: string, tokens: readonly { project: string; token: string }[]): readonly string[] | undefined {
    const pass = this.passes.get(workerId.toLowerCase());
    if (!pass) return undefined;
    const proven = new Set(tokens.filter(({ token }) => {
      const given = Buffer.from(token);
      return given.length === pass.token.length && timingSafeEqual(given, pass.token);
    }).map(({ project }) => project.toLowerCase()));
    return pass.projects.filter((project) => proven.has(project));
  }
}
