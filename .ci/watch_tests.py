#!/usr/bin/env python3
"""Runs a test command with a time limit, so that a test that hangs fails CI at once, with what it
was doing, instead of holding the run until the CI's own limit ends it with nothing said.

    python3 .ci/watch_tests.py --limit SECONDS --log FILE -- swift test ...

The command's output (stdout and stderr) goes to this script's stdout and to FILE as it comes.
When the command runs longer than SECONDS, the script prints the Swift Testing tests that started
and did not end, the stacks of every thread of the test process (gdb, where there is one), stops
the command, and exits with 124. Otherwise it exits with the command's status.
"""

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

ANSI = re.compile(r'\x1b\[[0-9;]*m')
STARTED = re.compile(r'^\S+ Test (?:case passing .* to )?("(?:[^"\\]|\\.)*"|\S+) started\.$')
ENDED = re.compile(r'^\S+ Test (.+?)(?: with \d+ test cases?)? (?:passed|failed) after [0-9.]+ seconds'
                   r'(?: with \d+ (?:issues?|known issues?|warnings?)(?:,? [^.]*)?)?\.$')
SKIPPED = re.compile(r'^\S+ Test (.+?) skipped(?:: .*)?\.?$')


def unfinished(lines):
    """The tests that started and did not end, in the order they started."""
    running = {}
    for line in lines:
        line = ANSI.sub('', line.rstrip('\n'))
        if started := STARTED.match(line):
            running.setdefault(started.group(1), line)
        elif ended := ENDED.match(line) or SKIPPED.match(line):
            running.pop(ended.group(1), None)
    return [line for name, line in running.items() if name != 'run']


def test_processes(root_pid):
    """`root_pid` and the processes under it (the test runner and its helpers)."""
    found, frontier = [root_pid], [root_pid]
    while frontier:
        pid = frontier.pop()
        try:
            children = subprocess.run(['ps', '-o', 'pid=', '--ppid', str(pid)], capture_output=True,
                                      text=True, check=False).stdout.split()
        except OSError:
            children = []
        for child in children:
            found.append(int(child))
            frontier.append(int(child))
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--limit', type=int, required=True, help='seconds the command may run')
    parser.add_argument('--log', required=True, help='a file that gets the output too')
    parser.add_argument('command', nargs=argparse.REMAINDER)
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ['--'] else args.command
    if args.limit <= 0 or not command:
        sys.exit('watch_tests.py: --limit must be a positive number of seconds, and a command given')

    lines = []
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               start_new_session=True, text=True, errors='replace')

    def pump():
        with open(args.log, 'w', encoding='utf-8') as log:
            for line in process.stdout:
                lines.append(line)
                sys.stdout.write(line)
                sys.stdout.flush()
                log.write(line)
                log.flush()

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    deadline = time.monotonic() + args.limit
    while process.poll() is None and time.monotonic() < deadline:
        time.sleep(1)
    if process.poll() is not None:
        reader.join()
        return process.returncode

    report = [f'\nerror: the tests ran longer than {args.limit} s: {" ".join(command)}']
    hanging = unfinished(list(lines))
    report.append(f'{len(hanging)} test(s) started and did not end:')
    report += [f'  {line}' for line in hanging]
    gdb = shutil.which('gdb')
    for pid in test_processes(process.pid):
        try:
            with open(f'/proc/{pid}/cmdline', encoding='utf-8', errors='replace') as cmdline:
                name = cmdline.read().replace('\0', ' ').strip()
        except OSError:
            continue
        if '.xctest' not in name:
            continue
        report.append(f'\nthreads of process {pid} ({name}):')
        if gdb:
            stacks = subprocess.run([gdb, '-batch', '-p', str(pid), '-ex', 'thread apply all bt 40'],
                                    capture_output=True, text=True, errors='replace', timeout=300,
                                    check=False).stdout
            report.append(stacks)
        else:
            report.append('  (no gdb on this machine: no stacks)')
    text = '\n'.join(report) + '\n'
    sys.stdout.write(text)
    sys.stdout.flush()
    with open(args.log, 'a', encoding='utf-8') as log:
        log.write(text)
    os.killpg(process.pid, signal.SIGKILL)
    process.wait()
    return 124


if __name__ == '__main__':
    sys.exit(main())
