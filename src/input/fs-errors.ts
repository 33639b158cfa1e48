/** Why a path could not be read or written, in words, from the errno code Node.js gives. */

const REASONS: Record<string, string> = {
  ENOENT: 'no such file or folder',
  ENOTDIR: 'a part of the path is a file, not a folder',
  EISDIR: 'it is a folder, not a file',
  EACCES: 'permission denied',
  EPERM: 'permission denied',
  EROFS: 'the file system is read-only',
  ELOOP: 'too many symbolic links in the path',
  ENAMETOOLONG: 'the path is too long',
  EMFILE: 'too many open files',
  ENOSPC: 'no space left on the device',
  EIO: 'an input/output error from the device',
};

/** The reason for a failed file-system call: the errno code in words, or the error's own message. */
export function fsReason(e: unknown): string {
  const code = (e as NodeJS.ErrnoException | undefined)?.code;
  if (code !== undefined && REASONS[code] !== undefined) return REASONS[code];
  return code ?? (e instanceof Error ? e.message : String(e));
}
