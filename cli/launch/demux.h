// What a launcher that runs many processes behind one pipe (srun, mpirun) forwards, split back
// into each member's lines. Both forward a long line in pieces, each labelled or tagged with
// its member, and other members' pieces may come between: a demux keeps each member's line
// until it is whole.
#ifndef PSBENCH_CLI_LAUNCH_DEMUX_H_
#define PSBENCH_CLI_LAUNCH_DEMUX_H_

#include <memory>

#include "cli/launch/process_group.h"

namespace psbench {

// Reassembles Open MPI's --tag-output stream into each rank's lines, stdout and stderr.
std::unique_ptr<Demux> MpirunTagDemux();

// Reassembles `srun --label` output ("  12: text" -> task 12) into each task's lines. srun
// forwards a line in chunks of 1024 bytes, each labelled as a line of its own, and ends every
// line with a shorter chunk (an empty one after a line of 1024 x k bytes): a chunk of exactly
// 1024 bytes continues on the task's next labelled line. A task's stderr, which srun labels
// alike, is told apart where srun's stderr is read apart (TakeStderr). (A task that exits may
// still have the rest of its output cut anywhere by srun's flush: records are gathered until
// they parse, cli/launch/job.cc.)
std::unique_ptr<Demux> SrunLabelDemux();

}  // namespace psbench

#endif  // PSBENCH_CLI_LAUNCH_DEMUX_H_
