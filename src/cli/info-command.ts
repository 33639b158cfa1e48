/** `gpumem info`: the backend, its libraries and each device's memory facts. */
import type { Command } from 'commander';
import { outputWidth, wrapText } from '../render/width.js';
import { withRuntime, type Io } from './context.js';
import { backendOption } from './options.js';

export function defineInfo(program: Command, io: Io): void {
  program
    .command('info')
    .description("backend, runtime and driver versions, libraries, and each device's memory facts")
    .addOption(backendOption())
    .option('--json', 'print JSON: { backend, runtimeVersion, driverVersion, libraries, devices: [...] }')
    .addHelpText('after', '\nExamples:\n  $ gpumem info\n  $ gpumem info --json > info.json\n  $ GPUMEM_BACKEND=hip gpumem info')
    .action((opts: { backend?: string; json?: boolean }) => runInfo(opts, io));
}

async function runInfo(opts: { backend?: string; json?: boolean }, io: Io): Promise<void> {
  const { collectInfo } = await import('../report/info.js');
  const { renderInfo } = await import('../render/info-text.js');
  await withRuntime(opts, io, (rt) => {
    const report = collectInfo(rt);
    io.out(opts.json ? `${JSON.stringify(report, null, 2)}\n` : `${wrapText(renderInfo(report), outputWidth())}\n`);
  });
}
