// A loopback OTLP/HTTP metrics collector for tests: it accepts POST /v1/metrics with an
// application/x-protobuf ExportMetricsServiceRequest and decodes the protobuf wire format itself
// (field numbers from opentelemetry-proto's metrics.proto and common.proto), strictly: a truncated
// or malformed message fails the request with 400, as a real collector would.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpPoint {
  attributes: Record<string, string>;
  value?: number;
  count?: number;
  sum?: number;
  bucketCounts?: number[];
  bounds?: number[];
}
export interface OtlpMetric {
  name: string;
  unit: string;
  kind: 'gauge' | 'sum' | 'histogram';
  monotonic?: boolean;
  points: OtlpPoint[];
}
export interface OtlpPush {
  resource: Record<string, string>;
  metrics: OtlpMetric[];
}

type Field = { no: number; wire: number; int?: bigint; bytes?: Buffer; fixed?: Buffer };

function fields(buf: Buffer): Field[] {
  const out: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let result = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (i >= buf.length || shift > 63n) throw new Error('truncated varint');
      const b = buf[i++]!;
      result |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return result;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >>> 3;
    const wire = key & 7;
    if (wire === 0) out.push({ no, wire, int: varint() });
    else if (wire === 1 || wire === 5) {
      const n = wire === 1 ? 8 : 4;
      if (i + n > buf.length) throw new Error('truncated fixed field');
      out.push({ no, wire, fixed: buf.subarray(i, i + n) });
      i += n;
    } else if (wire === 2) {
      const len = Number(varint());
      if (i + len > buf.length) throw new Error('truncated length-delimited field');
      out.push({ no, wire, bytes: buf.subarray(i, i + len) });
      i += len;
    } else throw new Error(`wire type ${wire}`);
  }
  return out;
}

const sub = (fs: Field[], no: number): Buffer[] => fs.filter((f) => f.no === no && f.bytes).map((f) => f.bytes!);
const str = (fs: Field[], no: number): string => sub(fs, no)[0]?.toString('utf8') ?? '';
const dbl = (f: Field | undefined): number | undefined => (f?.fixed ? f.fixed.readDoubleLE(0) : undefined);
const attrs = (fs: Field[], no: number): Record<string, string> => Object.fromEntries(sub(fs, no).map((kv) => {
  const k = fields(kv);
  const any = fields(sub(k, 2)[0] ?? Buffer.alloc(0));
  return [str(k, 1), str(any, 1)];
}));
const packedDoubles = (b: Buffer | undefined): number[] => (b ? Array.from({ length: b.length / 8 }, (_, j) => b.readDoubleLE(j * 8)) : []);
const packedFixed64 = (b: Buffer | undefined): number[] => (b ? Array.from({ length: b.length / 8 }, (_, j) => Number(b.readBigUInt64LE(j * 8))) : []);

function numberPoint(b: Buffer): OtlpPoint {
  const f = fields(b);
  const asInt = f.find((x) => x.no === 6)?.fixed;
  return { attributes: attrs(f, 7), value: dbl(f.find((x) => x.no === 4)) ?? (asInt ? Number(asInt.readBigInt64LE(0)) : 0) };
}

function histogramPoint(b: Buffer): OtlpPoint {
  const f = fields(b);
  return {
    attributes: attrs(f, 9), count: Number(f.find((x) => x.no === 4)?.fixed?.readBigUInt64LE(0) ?? 0n), sum: dbl(f.find((x) => x.no === 5)) ?? 0,
    bucketCounts: packedFixed64(sub(f, 6)[0]), bounds: packedDoubles(sub(f, 7)[0]),
  };
}

export function decodeMetricsRequest(body: Buffer): OtlpPush {
  const push: OtlpPush = { resource: {}, metrics: [] };
  for (const rm of sub(fields(body), 1)) {
    const rmf = fields(rm);
    Object.assign(push.resource, attrs(fields(sub(rmf, 1)[0] ?? Buffer.alloc(0)), 1));
    for (const sm of sub(rmf, 2)) {
      for (const m of sub(fields(sm), 2)) {
        const mf = fields(m);
        const base = { name: str(mf, 1), unit: str(mf, 3) };
        const gauge = sub(mf, 5)[0];
        const sum = sub(mf, 7)[0];
        const histogram = sub(mf, 9)[0];
        if (gauge) push.metrics.push({ ...base, kind: 'gauge', points: sub(fields(gauge), 1).map(numberPoint) });
        else if (sum) {
          const sf = fields(sum);
          push.metrics.push({ ...base, kind: 'sum', monotonic: sf.find((x) => x.no === 3)?.int === 1n, points: sub(sf, 1).map(numberPoint) });
        } else if (histogram) push.metrics.push({ ...base, kind: 'histogram', points: sub(fields(histogram), 1).map(histogramPoint) });
      }
    }
  }
  return push;
}

export interface OtlpCollector {
  url: string;
  pushes: OtlpPush[];
  close(): Promise<void>;
}

export async function startOtlpCollector(): Promise<OtlpCollector> {
  const pushes: OtlpPush[] = [];
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      if (req.method !== 'POST' || req.url !== '/v1/metrics' || req.headers['content-type'] !== 'application/x-protobuf') {
        res.writeHead(404).end();
        return;
      }
      try {
        pushes.push(decodeMetricsRequest(Buffer.concat(chunks)));
        // An empty ExportMetricsServiceResponse: full success.
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end(Buffer.alloc(0));
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`, pushes,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
