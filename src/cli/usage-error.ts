/** A usage error raised by a command's own option checks: the CLI prints it and exits with code 2. */
export class UsageError extends Error {}
