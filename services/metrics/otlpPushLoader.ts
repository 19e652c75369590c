// The OTLP push is loaded only when metrics.otlp.endpoint is set: the OpenTelemetry SDK and its
// protobuf exporter add about 20 MiB to a process that pushes nothing (docs/operations.md, "Memory
// at rest").
import type { OtlpPush, OtlpPushOptions } from './otlpPush.js';

export async function startOtlpPush(opts: OtlpPushOptions): Promise<OtlpPush> {
  const { startOtlpPush: start } = await import('./otlpPush.js');
  return start(opts);
}
